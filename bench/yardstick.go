package main

// The yardsticks: minimal loops against the same server, in two kinds.
// The bare loop (-client bare) is the least a client can do: N goroutines
// take the next prompt number, send the request body built by
// concatenation, and read the answer without decoding it (a plain body
// into io.Discard, a stream line by line, counting its data lines). The
// go-openai loop (-client go-openai, yardstick_openai.go) is the least a
// user of go-openai writes. Neither has a sink or retries: what synthgen
// does beyond them is its own cost.

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// roleEnv, when set to roleYardstick, makes the bench binary (or the test
// binary, see TestMain) run the yardstick instead of the scenarios: the
// harness re-executes itself so that the loop's CPU and peak RSS come from
// its own rusage.
const (
	roleEnv       = "SYNTHGEN_BENCH_ROLE"
	roleYardstick = "yardstick"
)

// appendBody writes the request body of prompt i, the same bytes of
// conversation synthgen sends for row i of the generated dataset (see
// promptText), so that the mock gives both the same answers.
func appendBody(b []byte, model string, i int64, maxTokens int, stream bool) []byte {
	b = append(b, `{"model":"`...)
	b = append(b, model...)
	b = append(b, `","messages":[{"role":"user","content":"`...)
	b = appendPrompt(b, i)
	b = append(b, `"}],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	if stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}}`...)
	} else {
		b = append(b, `,"stream":false}`...)
	}
	return b
}

// runYardstick is the loop's main: it prints one line "requests=N chunks=N
// failures=N" and fails when any request failed, since a yardstick that
// skipped work would flatter itself.
func runYardstick(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet(roleYardstick, flag.ContinueOnError)
	url := fs.String("url", "", "chat completions URL")
	model := fs.String("model", "mock-model", "model name")
	n := fs.Int64("n", 0, "requests (prompts 0..n-1)")
	c := fs.Int("c", 200, "requests in flight")
	maxTokens := fs.Int("max-tokens", 64, "max_tokens of each request")
	stream := fs.Bool("stream", false, "stream the answers")
	kind := fs.String("client", "bare", "bare (net/http, no JSON) or go-openai (CreateChatCompletion, its stream's Recv)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *n <= 0 || *c <= 0 {
		return fmt.Errorf("yardstick: need -url, -n > 0 and -c > 0 (got %q, %d, %d)", *url, *n, *c)
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        *c,
		MaxIdleConnsPerHost: *c,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
	var oa *openaiExchanger
	switch *kind {
	case "bare":
	case "go-openai":
		var err error
		if oa, err = newOpenAIExchanger(*url, *model, *maxTokens, *stream, client); err != nil {
			return err
		}
	default:
		return fmt.Errorf("yardstick: -client %q: want bare or go-openai", *kind)
	}
	var next, chunks, failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range *c {
		wg.Go(func() {
			buf := make([]byte, 0, 256)
			rd := bufio.NewReaderSize(nil, 4096)
			for {
				i := next.Add(1) - 1
				if i >= *n {
					return
				}
				var k int64
				var err error
				if oa != nil {
					buf = appendPrompt(buf[:0], i)
					k, err = oa.exchange(context.Background(), string(buf))
				} else {
					buf = appendBody(buf[:0], *model, i, *maxTokens, *stream)
					k, err = exchange(client, *url, buf, *stream, rd)
				}
				chunks.Add(k)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(stdout, "requests=%d chunks=%d failures=%d\n", *n, chunks.Load(), failures.Load())
	if f := failures.Load(); f > 0 {
		return fmt.Errorf("yardstick: %d of %d requests failed, the first: %v", f, *n, firstErr.Load())
	}
	return nil
}

var (
	dataPrefix = []byte("data: ")
	doneData   = []byte("data: [DONE]")
)

// exchange sends one request and reads its answer: the data lines of a
// stream are counted (not decoded), a plain body is discarded.
func exchange(client *http.Client, url string, body []byte, stream bool, rd *bufio.Reader) (int64, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	if !stream {
		_, err = io.Copy(io.Discard, resp.Body)
		return 0, err
	}
	rd.Reset(resp.Body)
	var k int64
	start, done := true, false
	for {
		line, err := rd.ReadSlice('\n')
		if start && bytes.HasPrefix(line, dataPrefix) {
			if bytes.HasPrefix(line, doneData) {
				done = true
			} else {
				k++
			}
		}
		start = err == nil // a line longer than the buffer continues
		if err == io.EOF {
			if !done {
				return k, fmt.Errorf("stream ended without [DONE] after %d chunks", k)
			}
			return k, nil
		}
		if err != nil && err != bufio.ErrBufferFull {
			return k, err
		}
	}
}

// yardstickMain runs the yardstick when the environment asks for it and
// exits; it returns otherwise.
func yardstickMain() {
	if os.Getenv(roleEnv) != roleYardstick {
		return
	}
	if err := runYardstick(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
