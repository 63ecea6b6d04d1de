package pool

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// endlessSource yields distinct prompts until the Engine drains.
type endlessSource struct{ i int64 }

func (s *endlessSource) Next() (dataset.Prompt, error) {
	s.i++
	id := strconv.FormatInt(s.i, 10)
	return dataset.Prompt{ID: id, Index: s.i, Messages: []chat.Message{{Role: "user", Content: "prompt " + id}}}, nil
}

// discardSink measures the Engine alone: nothing is skipped, nothing kept.
type discardSink struct{}

func (discardSink) Recovered() sink.Recovered          { return sink.Recovered{} }
func (discardSink) Write(*sink.Record) error           { return nil }
func (discardSink) WriteError(*sink.ErrorRecord) error { return nil }
func (discardSink) Flush() error                       { return nil }

// BenchmarkThroughput measures the performance bar (docs/performance.md): against a
// server whose every answer takes exactly latency, Little's law says N in
// flight complete N/latency requests per second. ideal_ratio is the measured
// steady-state rate over that ideal (1.00 = the Engine adds nothing);
// minimal is a bare loop of N goroutines posting the same body with the same
// transport, the floor any client pays on this machine. Compare the ratios
// within one run: the machine is shared.
func BenchmarkThroughput(b *testing.B) {
	const (
		n       = 200
		latency = 100 * time.Millisecond
		warmup  = 500 * time.Millisecond
		window  = 2 * time.Second
	)
	srv := &countingServer{hook: func(string) { time.Sleep(latency) }}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ideal := float64(n) / latency.Seconds()

	measure := func(b *testing.B, run func(stop <-chan struct{})) {
		for range b.N {
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { defer close(done); run(stop) }()
			time.Sleep(warmup)
			before := srv.completed.Load()
			start := time.Now()
			time.Sleep(window)
			got := srv.completed.Load() - before
			elapsed := time.Since(start)
			close(stop)
			<-done
			rate := float64(got) / elapsed.Seconds()
			b.ReportMetric(rate, "req/s")
			b.ReportMetric(rate/ideal, "ideal_ratio")
		}
	}

	b.Run("engine", func(b *testing.B) {
		client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: n})
		measure(b, func(stop <-chan struct{}) {
			opts := testOptions(n)
			opts.SyncInterval = time.Second
			eng, _ := New(client, runstats.NewStats(nil), opts)
			go func() { <-stop; eng.Drain() }()
			if _, err := eng.Run(context.Background(), &endlessSource{}, discardSink{}); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("engine+jsonl", func(b *testing.B) {
		client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: n})
		measure(b, func(stop <-chan struct{}) {
			opts := testOptions(n)
			opts.SyncInterval = time.Second
			eng, _ := New(client, runstats.NewStats(nil), opts)
			out, err := sink.Open(sink.Options{Dir: b.TempDir(), Format: "jsonl", PartSize: 1000, SyncInterval: time.Second,
				Job: sink.JobRecord{Version: "bench", Hash: "bench"}})
			if err != nil {
				b.Error(err)
				return
			}
			go func() { <-stop; eng.Drain() }()
			if _, err := eng.Run(context.Background(), &endlessSource{}, out); err != nil {
				b.Error(err)
			}
			if err := out.Close(); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("minimal", func(b *testing.B) {
		hc := &http.Client{Transport: wire.NewTransport(n, nil)}
		body, _ := wire.EncodeRequest(wire.Request{Sampling: job.Sampling{Model: "test-model", MaxTokens: 64}, Messages: []chat.Message{{Role: "user", Content: "prompt 1"}}})
		measure(b, func(stop <-chan struct{}) {
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						resp, err := hc.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}()
			}
			wg.Wait()
		})
	})
}

// instantCompleter answers at once, with a 300-token answer, so that only
// the Engine's own memory is measured.
type instantCompleter struct{}

func (instantCompleter) Complete(_ context.Context, _ wire.Request, onDelta func(int)) (wire.Response, error) {
	for range 3 {
		onDelta(1)
	}
	return wire.Response{Model: "m", Reasoning: "r", Content: "c", FinishReason: "stop",
		PromptTokens: 20, CompletionTokens: 300, UsageKnown: true, Chunks: 3}, nil
}

// BenchmarkMemoryByDatasetSize: the bar is that memory is set by
// the concurrency, not the dataset. The same 200-slot Engine runs 10x more
// prompts; live_heap_MB is the heap still reachable when the run ends
// (after a GC), which should not grow 10x with them.
func BenchmarkMemoryByDatasetSize(b *testing.B) {
	for _, n := range []int{20_000, 200_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				eng, _ := New(instantCompleter{}, runstats.NewStats(nil), testOptions(200))
				src := &countedSource{n: int64(n)}
				if _, err := eng.Run(context.Background(), src, discardSink{}); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "live_heap_MB")
				runtime.KeepAlive(eng)
			}
		})
	}
}

// countedSource yields n distinct prompts.
type countedSource struct{ i, n int64 }

func (s *countedSource) Next() (dataset.Prompt, error) {
	if s.i >= s.n {
		return dataset.Prompt{}, io.EOF
	}
	s.i++
	id := strconv.FormatInt(s.i, 10)
	return dataset.Prompt{ID: id, Index: s.i, Messages: []chat.Message{{Role: "user", Content: "prompt " + id}}}, nil
}
