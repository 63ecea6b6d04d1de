package pool

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// TestServerRestartLosesNoPrompt: the server goes away for longer than all
// retries of a prompt would last, then comes back on the same address. No
// prompt may be marked failed for it (before the gate, every prompt reached
// during the outage used up its attempts within seconds), every prompt is
// answered once, and the stats say the server was down while it was.
func TestServerRestartLosesNoPrompt(t *testing.T) {
	t.Parallel()
	const rows, n = 300, 20
	srv := &countingServer{hook: func(string) { time.Sleep(2 * time.Millisecond) }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)

	client := wire.New(wire.Options{BaseURL: "http://" + addr + "/v1", MaxConns: n})
	opts := testOptions(n)
	opts.Retry = RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	stats := runstats.NewStats(nil)
	eng, err := New(client, stats, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The outage's prober starts at 1 s; the server stays away longer than
	// every retry of a prompt (two attempts a few ms apart) and until the
	// stats show it down, however long a loaded machine takes to get there
	// (30 s: a bound for a failure, not a wait).
	sawDown := make(chan bool, 1)
	go func() {
		for srv.completed.Load() < rows/3 {
			time.Sleep(time.Millisecond)
		}
		_ = hs.Close() // drops every connection: in-flight requests fail
		down := false
		for start := time.Now(); (!down || time.Since(start) < 1500*time.Millisecond) && time.Since(start) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
			if !stats.Snapshot().ServerDownSince.IsZero() {
				down = true
			}
		}
		sawDown <- down
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		hs2 := &http.Server{Handler: srv}
		t.Cleanup(func() { hs2.Close() })
		go hs2.Serve(ln2)
	}()

	dir := t.TempDir()
	out := openSink(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(numberedIDs(rows)...), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if !<-sawDown {
		t.Error("stats never showed the server as down during the outage")
	}
	if sum.Failed != 0 {
		t.Errorf("%d prompts marked failed because the server restarted (%v); want 0", sum.Failed, stats.Snapshot().ErrorsByCause)
	}
	seen := readIDs(t, dir)
	for _, id := range numberedIDs(rows) {
		if seen[id] != 1 {
			t.Errorf("id %s present %d times, want 1", id, seen[id])
		}
	}
	if snap := stats.Snapshot(); !snap.ServerDownSince.IsZero() {
		t.Errorf("server still shown down after the run: since %v", snap.ServerDownSince)
	}
}

// TestConnectionFailureOfOnePromptCounts: a prompt whose every attempt
// drops the connection while the server stays up is the prompt's fault (a
// server that crashes on one prompt looks like this): it fails after
// max_attempts and the others are answered.
func TestConnectionFailureOfOnePromptCounts(t *testing.T) {
	srv := &countingServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("prompt poison")) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		srv.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	defer hs.Close()

	client := wire.New(wire.Options{BaseURL: "http://" + ln.Addr().String() + "/v1", MaxConns: 4})
	opts := testOptions(4)
	opts.Retry = RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	eng, _ := New(client, runstats.NewStats(nil), opts)
	out := openSink(t, t.TempDir())
	defer out.Close()
	sum, err := eng.Run(context.Background(), newSliceSource("a", "poison", "b"), out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 1 || sum.Written != 2 {
		t.Fatalf("failed %d written %d; want the poison prompt failed and the 2 others written", sum.Failed, sum.Written)
	}
}

// TestOutageEndsAtTheFirstAnswer: while the gate is down, its prober waits
// up to 30 s between probes; a request answered meanwhile (a slot that was
// not waiting, or a new one) shows the server is back. The stats must stop
// saying "down" then, and the waiting slots go on, instead of the progress
// line reporting the server unreachable for two more intervals.
func TestOutageEndsAtTheFirstAnswer(t *testing.T) {
	stats := runstats.NewStats(nil)
	life, cancel := context.WithCancel(context.Background())
	defer cancel()
	var probes atomic.Int64
	o := &outage{
		life:       life,
		probe:      func(context.Context) error { probes.Add(1); return errors.New("connection refused") },
		minBackoff: time.Hour, // the prober never probes again in this test
		maxBackoff: time.Hour,
		now:        time.Now,
		onChange:   stats.SetServerDown,
	}
	o.answered(o.sent()) // up: nothing to do
	before := o.sent()
	waited := make(chan bool)
	go func() {
		wasDown, err := o.check(context.Background())
		if err != nil {
			t.Errorf("check: %v", err)
		}
		waited <- wasDown
	}()
	for stats.Snapshot().ServerDownSince.IsZero() {
		time.Sleep(time.Millisecond) // until the slot found the server down
	}
	// An answer to a request sent before the outage began proves nothing.
	o.answered(before)
	if stats.Snapshot().ServerDownSince.IsZero() {
		t.Fatal("an answer to a request sent before the outage ended it")
	}
	o.answered(o.sent()) // a request sent during the outage was answered
	if since := stats.Snapshot().ServerDownSince; !since.IsZero() {
		t.Errorf("still down since %v after a request was answered", since)
	}
	if !<-waited {
		t.Error("the waiting slot was not told the server had been down")
	}
	o.answered(o.sent()) // once more: the outage is over already
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes, want the slot's one", n)
	}
}

// TestOutageNudgedByMetrics: a server seen again (its /metrics answered)
// is probed at once, not at the prober's next wait, up to 30 s away: the
// gate opens with no answer to any request.
func TestOutageNudgedByMetrics(t *testing.T) {
	stats := runstats.NewStats(nil)
	life, cancel := context.WithCancel(context.Background())
	defer cancel()
	var up atomic.Bool
	o := &outage{
		life: life,
		probe: func(context.Context) error {
			if up.Load() {
				return nil
			}
			return errors.New("connection refused")
		},
		minBackoff: time.Hour, // the prober would wait an hour
		maxBackoff: time.Hour,
		now:        time.Now,
		onChange:   stats.SetServerDown,
		kick:       make(chan struct{}, 1),
	}
	o.nudge() // up: a nudge then is not kept for the next outage
	waited := make(chan bool)
	go func() {
		wasDown, err := o.check(context.Background())
		if err != nil {
			t.Errorf("check: %v", err)
		}
		waited <- wasDown
	}()
	for stats.Snapshot().ServerDownSince.IsZero() {
		time.Sleep(time.Millisecond) // until the slot found the server down
	}
	up.Store(true)
	o.nudge()
	if !<-waited {
		t.Error("the waiting slot was not told the server had been down")
	}
	if since := stats.Snapshot().ServerDownSince; !since.IsZero() {
		t.Errorf("still down since %v after the nudge", since)
	}
}
