// Command synthgen generates a dataset of model answers from a dataset of
// prompts against an OpenAI-compatible server (vLLM, SGLang, ...), keeping a
// fixed number of requests in flight and writing resumable shards.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
)

func main() {
	ignoreBrokenPipe()
	err := profiled(func() error { return newRootCmd().ExecuteContext(context.Background()) })
	if err == nil {
		return
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
