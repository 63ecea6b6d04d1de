package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// TestDuplicateIDAskedOnceRunGoesOn: a dataset whose id column repeats an
// id (real datasets do) must not stop an eight-hour run. Before, both rows
// were requested, the second answer hit the sink's "a key is written once"
// and the whole run died with a write error, cancelling everything in
// flight. Now a key is requested once per run and the run ends normally.
func TestDuplicateIDAskedOnceRunGoesOn(t *testing.T) {
	tests := []struct {
		name        string
		concurrency int
		ids         []string
	}{
		{"both in flight together", 4, []string{"a", "b", "a"}},
		{"one slot", 1, []string{"a", "a", "b", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			unique := map[string]bool{}
			for _, id := range tc.ids {
				unique[id] = true
			}
			// Hold every request until all rows could have been asked, so
			// the copies are in flight at once when the Engine sends them.
			allIn := make(chan struct{})
			var once atomic.Bool
			srv := &countingServer{}
			srv.hook = func(string) {
				if srv.requests.Load() >= int64(len(tc.ids)) && once.CompareAndSwap(false, true) {
					close(allIn)
				}
				select {
				case <-allIn:
				case <-time.After(200 * time.Millisecond):
				}
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			dir := t.TempDir()
			out := openSink(t, dir)
			stats := runstats.NewStats(nil)
			stats.SetTotal(int64(len(tc.ids)))
			eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: tc.concurrency}), stats, testOptions(tc.concurrency))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sum, err := eng.Run(ctx, newSliceSource(tc.ids...), out)
			if err != nil {
				t.Fatalf("Run: %v; a repeated id must not stop the run", err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			seen := readIDs(t, dir)
			for id := range unique {
				if seen[id] != 1 {
					t.Errorf("id %s on disk %d times, want 1", id, seen[id])
				}
			}
			if got := srv.requests.Load(); got != int64(len(unique)) {
				t.Errorf("server asked %d times for %d distinct keys", got, len(unique))
			}
			dups := len(tc.ids) - len(unique)
			if sum.Written != len(unique) || sum.Duplicates != dups || sum.BadRows != int64(dups) || sum.Skipped != 0 {
				t.Errorf("summary %+v: want %d written and %d repeats, bad rows, none already done", sum, len(unique), dups)
			}
			// A repeat is a bad row, out of the total: not a key done
			// before this run (the directory was empty).
			if snap := stats.Snapshot(); snap.Done+snap.Errors != int64(len(unique)) || snap.AlreadyDone != 0 || snap.Total != int64(len(unique)) || snap.BadRows != int64(dups) {
				t.Errorf("progress done %d + already %d of total %d, %d bad rows; want the repeats out of the total as bad rows", snap.Done, snap.AlreadyDone, snap.Total, snap.BadRows)
			}
		})
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// runAsync runs eng in a goroutine.
type runAsync struct {
	done chan struct{}
	sum  runstats.Summary
	err  error
	at   time.Time // when Run returned
}

func startRun(ctx context.Context, eng *Engine, src Source, out Output) *runAsync {
	r := &runAsync{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.sum, r.err = eng.Run(ctx, src, out)
		r.at = time.Now()
	}()
	return r
}

// waitFor polls cond every few milliseconds for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestDrainStartsNoNewAttempt: Drain means "no new request starts, the ones
// in flight finish". A slot waiting between two attempts (a backoff after a
// 503 with Retry-After, or the outage gate while the server is away) has
// nothing in flight: it must stop at once, write nothing (not an error
// record: the key is asked again on resume), and not send another attempt.
// Before, such slots kept waiting, so a Ctrl-C while the server was down
// sat out the whole shutdown.grace (2 minutes by default) for nothing, and
// a Ctrl-C during a backoff sent new requests after the drain.
func TestDrainStartsNoNewAttempt(t *testing.T) {
	var requests atomic.Int64
	overloaded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"test-model","object":"model"}]}`)
			return
		}
		requests.Add(1)
		w.Header().Set("Retry-After", "30")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"object":"error","message":"overloaded","code":503}`)
	}))
	defer overloaded.Close()

	tests := []struct {
		name    string
		baseURL string
		// waiting is true once every slot waits between attempts.
		waiting func(*runstats.Stats) bool
	}{
		{"backoff after 503", overloaded.URL + "/v1", func(s *runstats.Stats) bool { return s.Snapshot().Retries >= 3 }},
		{"server away", "http://" + deadAddr(t) + "/v1", func(s *runstats.Stats) bool { return !s.Snapshot().ServerDownSince.IsZero() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requests.Store(0)
			dir := t.TempDir()
			out := openSink(t, dir)
			stats := runstats.NewStats(nil)
			opts := testOptions(3)
			opts.Retry = RetryPolicy{MaxAttempts: 5, InitialBackoff: 10 * time.Second, MaxBackoff: 10 * time.Second}
			eng, err := New(wire.New(wire.Options{BaseURL: tc.baseURL, MaxConns: 3}), stats, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := startRun(ctx, eng, newSliceSource(numberedIDs(10)...), out)
			waitFor(t, 15*time.Second, "every slot waiting between attempts", func() bool { return tc.waiting(stats) })
			sent := requests.Load()
			drained := time.Now()
			eng.Drain()
			select {
			case <-r.done:
			case <-time.After(10 * time.Second): // its context ends at 20 s
				cancel()
				<-r.done
				t.Fatalf("Run still waiting 10 s after Drain with nothing in flight (it ended only when its context was cancelled)")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if d := r.at.Sub(drained); d > time.Second {
				t.Errorf("Run took %v after Drain with nothing in flight", d)
			}
			if got := requests.Load(); got != sent {
				t.Errorf("%d new requests sent after Drain", got-sent)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			snap := stats.Snapshot()
			if r.sum.Written != 0 || r.sum.Failed != 0 || snap.Errors != 0 || snap.InFlight != 0 || !r.sum.Drained {
				t.Errorf("summary %+v, errors %d, in flight %d: want nothing written, no error, drained", r.sum, snap.Errors, snap.InFlight)
			}
			if r.sum.Canceled < 3 {
				t.Errorf("canceled %d, want the 3 waiting keys counted as cut", r.sum.Canceled)
			}
			if errs, _ := filepath.Glob(filepath.Join(dir, "errors", "part-*")); len(errs) != 0 {
				t.Errorf("error records written for keys cut by the drain: %v", errs)
			}
		})
	}
}

// eofSource wraps a Source and closes ended once it has returned io.EOF.
type eofSource struct {
	Source
	ended chan struct{}
	once  atomic.Bool
}

func (s *eofSource) Next() (dataset.Prompt, error) {
	p, err := s.Source.Next()
	if errors.Is(err, io.EOF) && s.once.CompareAndSwap(false, true) {
		close(s.ended)
	}
	return p, err
}

// TestDrainedMeansIntakeStopped: Summary.Drained says intake stopped before
// the Source ended, which is how the run command tells a job that still has
// keys to ask (exit 130, "rerun to resume") from one that a late Ctrl-C
// left complete. Before, Drained was true whenever Drain had been called,
// even after the last prompt had been taken.
func TestDrainedMeansIntakeStopped(t *testing.T) {
	tests := []struct {
		name        string
		rows        int
		drainAfter  func(src *eofSource, srv *countingServer) <-chan struct{}
		wantDrained bool
		wantWritten int
	}{
		{"after the last prompt was taken", 2, func(src *eofSource, srv *countingServer) <-chan struct{} {
			c := make(chan struct{})
			go func() {
				<-src.ended
				for srv.requests.Load() < 2 {
					time.Sleep(time.Millisecond)
				}
				close(c)
			}()
			return c
		}, false, 2},
		{"with prompts left", 10, func(_ *eofSource, srv *countingServer) <-chan struct{} {
			c := make(chan struct{})
			go func() {
				for srv.requests.Load() < 2 {
					time.Sleep(time.Millisecond)
				}
				close(c)
			}()
			return c
		}, true, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := &countingServer{hook: func(string) { <-release }}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			eng, _ := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 2}), runstats.NewStats(nil), testOptions(2))
			src := &eofSource{Source: newSliceSource(numberedIDs(tc.rows)...), ended: make(chan struct{})}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := startRun(ctx, eng, src, discardSink{})
			select {
			case <-tc.drainAfter(src, srv):
			case <-time.After(15 * time.Second): // its context ends at 20 s
				t.Fatal("the run never reached the moment to drain")
			}
			eng.Drain()
			close(release)
			<-r.done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.sum.Drained != tc.wantDrained || r.sum.Written != tc.wantWritten {
				t.Errorf("drained %v written %d; want %v, %d", r.sum.Drained, r.sum.Written, tc.wantDrained, tc.wantWritten)
			}
		})
	}
}

// TestRunLeavesNoGoroutine: whatever way Run ends (done, the sink failing,
// its context cancelled while the server is away and the outage prober
// runs, a drain), no goroutine it started outlives it for long.
func TestRunLeavesNoGoroutine(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, tr *http.Transport)
	}{
		{"done", func(t *testing.T, tr *http.Transport) {
			ts := httptest.NewServer(&countingServer{})
			defer ts.Close()
			eng, _ := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", HTTPClient: &http.Client{Transport: tr}}), nil, testOptions(8))
			if _, err := eng.Run(context.Background(), newSliceSource(numberedIDs(50)...), discardSink{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"sink fails", func(t *testing.T, tr *http.Transport) {
			ts := httptest.NewServer(&countingServer{hook: func(string) { time.Sleep(time.Millisecond) }})
			defer ts.Close()
			eng, _ := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", HTTPClient: &http.Client{Transport: tr}}), nil, testOptions(8))
			if _, err := eng.Run(context.Background(), newSliceSource(numberedIDs(200)...), &failingSink{n: 5}); err == nil {
				t.Fatal("Run succeeded on a failing sink")
			}
		}},
		{"cancelled during an outage", func(t *testing.T, tr *http.Transport) {
			stats := runstats.NewStats(nil)
			eng, _ := New(wire.New(wire.Options{BaseURL: "http://" + deadAddr(t) + "/v1", HTTPClient: &http.Client{Transport: tr}}), stats, testOptions(4))
			ctx, cancel := context.WithCancel(context.Background())
			r := startRun(ctx, eng, newSliceSource(numberedIDs(20)...), discardSink{})
			waitFor(t, 15*time.Second, "the server shown down", func() bool { return !stats.Snapshot().ServerDownSince.IsZero() })
			cancel()
			<-r.done
			if r.err != nil {
				t.Fatal(r.err)
			}
		}},
		{"drained during an outage", func(t *testing.T, tr *http.Transport) {
			stats := runstats.NewStats(nil)
			eng, _ := New(wire.New(wire.Options{BaseURL: "http://" + deadAddr(t) + "/v1", HTTPClient: &http.Client{Transport: tr}}), stats, testOptions(4))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := startRun(ctx, eng, newSliceSource(numberedIDs(20)...), discardSink{})
			waitFor(t, 15*time.Second, "the server shown down", func() bool { return !stats.Snapshot().ServerDownSince.IsZero() })
			eng.Drain()
			<-r.done
			if r.err != nil {
				t.Fatal(r.err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The goroutines alive now (the test runner's, those of an
			// earlier test on their way out) are not this run's; goleak
			// names each one that is left, with its stack, rather than a
			// count that another goroutine starting or ending can skew.
			ignore := goleak.IgnoreCurrent()
			tr := wire.NewTransport(8, nil)
			tc.run(t, tr)
			// Connections the run returned to the pool end here; one
			// still in use (a body not closed) keeps its readLoop and fails.
			tr.CloseIdleConnections()
			// Closed connections' goroutines end a moment later, and
			// goleak's own retries stop after about half a second, which a
			// busy machine can outlast: look again until a generous
			// deadline that only a real leak reaches, then report.
			for deadline := time.Now().Add(10 * time.Second); goleak.Find(ignore) != nil && time.Now().Before(deadline); {
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}
