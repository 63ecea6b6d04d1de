package pool

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// gatedServer holds every request until the test lets one go.
type gatedServer struct {
	*countingServer
	gate chan struct{}
}

func newGatedServer() *gatedServer {
	g := &gatedServer{countingServer: &countingServer{}, gate: make(chan struct{})}
	g.hook = func(string) { <-g.gate }
	return g
}

// TestLimitMovesWhileRunning: the Engine's limit changes while requests are
// in flight. Growing starts more at once; shrinking lets the ones in flight
// finish and starts none until fewer than the new limit are in flight.
// Every key is still asked once.
func TestLimitMovesWhileRunning(t *testing.T) {
	srv := newGatedServer()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	opts := testOptions(8)
	opts.Limit = 2
	client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 8})
	eng, err := New(client, runstats.NewStats(nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	ids := numberedIDs(20)
	run := startRun(context.Background(), eng, newSliceSource(ids...), out)

	inFlight := func(n int64) func() bool { return func() bool { return srv.inFlight.Load() == n } }
	waitFor(t, 10*time.Second, "2 in flight", inFlight(2))
	if got := srv.requests.Load(); got != 2 {
		t.Fatalf("limit 2: %d requests started, want 2", got)
	}
	if got := eng.SetLimit(6); got != 6 || eng.Limit() != 6 {
		t.Fatalf("SetLimit(6) = %d, Limit %d", got, eng.Limit())
	}
	waitFor(t, 10*time.Second, "6 in flight after growing", inFlight(6))

	// Shrink to 1: the 6 in flight finish, and only once none is left
	// does one more start.
	eng.SetLimit(1)
	for range 6 {
		srv.gate <- struct{}{}
	}
	waitFor(t, 10*time.Second, "1 in flight after shrinking", inFlight(1))
	if got := srv.requests.Load(); got != 7 {
		t.Errorf("after shrinking to 1 and finishing 6: %d requests started, want 7", got)
	}
	if got := eng.SetLimit(100); got != 8 {
		t.Errorf("SetLimit(100) with 8 workers = %d, want 8", got)
	}
	waitFor(t, 10*time.Second, "8 in flight at the ceiling", inFlight(8))
	var wg sync.WaitGroup
	wg.Go(func() {
		for range len(ids) - 6 {
			srv.gate <- struct{}{}
		}
	})
	<-run.done
	wg.Wait()
	if run.err != nil {
		t.Fatal(run.err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if srv.peak.Load() != 8 || run.sum.Written != len(ids) {
		t.Errorf("peak %d, written %d; want 8, %d", srv.peak.Load(), run.sum.Written, len(ids))
	}
	seen := readIDs(t, dir)
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("id %s written %d times, want 1", id, seen[id])
		}
	}
}

// TestLimiterWaitersEndOnClose: a worker waiting for a place ends when the
// pool closes, whatever the limit.
func TestLimiterWaitersEndOnClose(t *testing.T) {
	l := newLimiter(1)
	if !l.acquire() {
		t.Fatal("first acquire failed")
	}
	got := make(chan bool)
	go func() { got <- l.acquire() }()
	l.close()
	if <-got {
		t.Error("acquire after close succeeded")
	}
	if l.set(0) != 1 || l.get() != 1 {
		t.Errorf("a limit below 1 is 1: got %d", l.get())
	}
}
