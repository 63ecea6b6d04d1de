package pool

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// producerWaitsForSlot reports whether the producer is blocked handing a
// key to the pool (every slot is taken).
func producerWaitsForSlot() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[chan send") && strings.Contains(g, "(*pool).submit") {
			return true
		}
	}
	return false
}

// TestCanceledIsWhatWasInFlight: a run drained, then cut, while every slot
// holds a request and the producer waits with the next key counts as
// canceled the keys whose requests it abandoned: those in flight, once
// each (a whole conversation cut at its first turn is one key), not the
// key a worker took after intake stopped and never began. Before, that key
// counted too: canceled 5 with 4 in flight (issue 21: 17 with 16).
func TestCanceledIsWhatWasInFlight(t *testing.T) {
	const conc = 4
	for _, whole := range []bool{false, true} {
		name := map[bool]string{false: "turns first", true: "turns all"}[whole]
		t.Run(name, func(t *testing.T) {
			// 4000 tokens of 50 ms: no answer ends while the test runs.
			m := mockserver.New(mockserver.Options{Model: "test-model", TokenDelay: 50 * time.Millisecond, MeanTokens: 4000, Seed: 3})
			ts := httptest.NewServer(m)
			defer ts.Close()
			opts := testOptions(conc)
			opts.Stream = true
			opts.Sampling.MaxTokens = 4000
			var src Source = newSliceSource(numberedIDs(10)...)
			if whole {
				opts.Prompt = job.Prompting{Turns: job.TurnsAll}
				src = newConversationSource(numberedIDs(10), 3, false)
			}
			stats := runstats.NewStats(nil)
			eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: conc}), stats, opts)
			if err != nil {
				t.Fatal(err)
			}
			out := openSink(t, t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cut, cutNow := context.WithCancel(ctx)
			r := startRun(cut, eng, src, out)
			waitFor(t, 10*time.Second, "every slot in flight and the producer waiting for one", func() bool {
				return stats.Snapshot().InFlight == conc && producerWaitsForSlot()
			})
			eng.Drain()
			cutNow() // the grace is over: the requests in flight are cut
			select {
			case <-r.done:
			case <-ctx.Done():
				t.Fatal("Run did not return after its requests were cut")
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			if r.sum.Written != 0 || r.sum.Failed != 0 || !r.sum.Drained || stats.Snapshot().Errors != 0 {
				t.Errorf("summary %+v: want nothing written or failed, drained", r.sum)
			}
			if r.sum.Canceled != conc {
				t.Errorf("canceled %d with %d in flight: want the keys whose requests were cut, %d", r.sum.Canceled, conc, conc)
			}
			if n := eng.pending.len(); n != 0 {
				t.Errorf("%d keys still pending", n)
			}
		})
	}
}
