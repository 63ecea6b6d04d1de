// Command synthgen generates a dataset of model answers from a dataset of
// prompts against an OpenAI-compatible server (vLLM, SGLang, ...), keeping a
// fixed number of requests in flight and writing resumable shards.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

func main() {
	ignoreBrokenPipe()
	err := profiled(func() error { return newRootCmd().ExecuteContext(context.Background()) })
	if err == nil {
		return
	}
	if readerGone(err) {
		os.Exit(exitCode(err)) // `synthgen ... | head`: nobody reads a message now
	}
	if askedFor(err) {
		fmt.Fprintln(os.Stderr, err)
	} else {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
	}
	var he interface{ Hint() string }
	if errors.As(err, &he) && he.Hint() != "" {
		fmt.Fprintf(os.Stderr, "Hint: %s\n", he.Hint())
	}
	os.Exit(exitCode(err))
}

// readerGone reports whether err is a write to a pipe whose reader closed
// it (SIGPIPE is ignored, so the write fails with EPIPE instead): `synthgen
// inspect DIR | head` is a reader done, not an error to tell.
func readerGone(err error) bool { return errors.Is(err, syscall.EPIPE) }
