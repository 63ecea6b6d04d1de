package wire

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/mockserver"
)

// TestStrandedStreamsAreCut: a server queues streams without a byte
// (llama-server's way), is stopped while holding its queue, and a new one
// starts on the same address. The streams queued on the old one are cut
// (cause stall, saying why) once a later request has had its headers from
// the new one, instead of waiting for endpoint.timeout; the running ones
// finish; new requests are answered. What waits is counted (OnAwait).
func TestStrandedStreamsAreCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// The running two stream slowly, a token each 100 ms (within the
	// stall bound), for 3 s (max_tokens 30): the queued two wait long
	// enough to be counted (awaitShown) before the old server goes.
	opts := mockserver.Options{Model: "m", MeanTokens: 2000, TokenDelay: 100 * time.Millisecond, MaxRunning: 2, HeadersWhenRunning: true, Seed: 1}
	old := mockserver.New(opts)
	oldCtx, stopOld := context.WithCancel(context.Background())
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.Serve(oldCtx, ln, time.Second) }()
	t.Cleanup(func() { stopOld(); <-oldDone })

	var awaiting atomic.Int64
	c := New(Options{BaseURL: "http://" + addr + "/v1", StallTimeout: 2 * time.Second, OnAwait: func(d int) { awaiting.Add(int64(d)) }})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := Request{Stream: true, Messages: []chat.Message{{Role: "user", Content: "a long answer please"}}}
	req.Model, req.MaxTokens = "m", 30

	type outcome struct {
		resp Response
		err  error
	}
	first := make(chan outcome, 4)
	for range 4 {
		go func() {
			r, err := c.Complete(ctx, req, nil)
			first <- outcome{r, err}
		}()
	}
	waitUntil(t, "2 running and 2 queued on the old server", func() bool {
		st := old.Stats()
		return st.Running == 2 && st.Waiting == 2
	})
	// Counted once they have waited a second (awaitShown).
	waitUntil(t, "the 2 queued counted as waiting for their headers", func() bool { return awaiting.Load() == 2 })
	old.Abandon() // stops listening, holds the queued two without a byte
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fresh := mockserver.New(mockserver.Options{Model: "m", MeanTokens: 20, Seed: 2})
	newCtx, stopNew := context.WithCancel(context.Background())
	newDone := make(chan error, 1)
	go func() { newDone <- fresh.Serve(newCtx, ln2, time.Second) }()
	t.Cleanup(func() { stopNew(); <-newDone })

	if _, err := c.Complete(ctx, req, nil); err != nil {
		t.Fatalf("a new request to the new server: %v", err)
	}
	var answered, stranded int
	for range 4 {
		o := <-first
		switch ce := Classify(o.err); {
		case o.err == nil:
			answered++
		case ce.Cause == CauseStall && strings.Contains(ce.Message, "not even headers") && errors.Is(o.err, errStranded):
			stranded++
		default:
			t.Errorf("a first request ended with %v", o.err)
		}
	}
	if answered != 2 || stranded != 2 {
		t.Errorf("%d answered, %d cut as stranded; want the 2 running answered and the 2 queued cut", answered, stranded)
	}
	if n := awaiting.Load(); n != 0 {
		t.Errorf("%d still counted as waiting", n)
	}
}

// TestQueuedStreamsWaitTheirTurn: streams queued without a byte are not cut
// while no later request overtakes them, however long they wait.
func TestQueuedStreamsWaitTheirTurn(t *testing.T) {
	clk := newFakeClock()
	advance := clk.advance
	a := testAwaiting(t, clk, time.Second, nil)
	var cuts atomic.Int64
	cut := func(error) { cuts.Add(1) }
	doneFirst := a.sent(cut, false)
	_ = a.sent(cut, false)
	advance(time.Hour)
	a.check()
	if cuts.Load() != 0 {
		t.Fatal("a stream waiting its turn, none overtaking it, was cut")
	}
	doneFirst.done(true) // the first in the queue had its headers: in order
	advance(time.Hour)
	a.check()
	if cuts.Load() != 0 {
		t.Fatal("the second stream was cut though only an earlier one was answered")
	}
	doneThird := a.sent(cut, false)
	doneThird.done(true) // a later one overtook the second
	a.check()            // marks it overtaken
	if cuts.Load() != 0 {
		t.Fatal("cut the moment it was overtaken, want StallTimeout after")
	}
	advance(time.Second)
	a.check()
	if cuts.Load() != 1 {
		t.Fatalf("overtaken a StallTimeout ago: %d cut, want 1", cuts.Load())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil {
		a.timer.Stop()
	}
}

// TestSilentReplicaStreamsAreCut: among replicas, a stream without headers
// a StallTimeout after it was sent, to a server that has said nothing since
// while another replica answered or stood idle, is cut with errSilent; not
// while every other replica holds requests and says nothing either, nor
// while its own server shows life: headers to an earlier request, or bytes
// on a stream being read.
func TestSilentReplicaStreamsAreCut(t *testing.T) {
	clk := newFakeClock()
	now, advance := clk.now, clk.advance
	group := NewReplicas()
	a, b := testAwaiting(t, clk, time.Second, group), testAwaiting(t, clk, time.Second, group)
	var silent, other atomic.Int64
	cut := func(cause error) {
		if errors.Is(cause, errSilent) {
			silent.Add(1)
		} else {
			other.Add(1)
		}
	}
	bWaits := b.sent(func(error) {}, false) // the other replica holds one, silent too
	_ = a.sent(cut, false)
	advance(time.Hour)
	a.check()
	if silent.Load()+other.Load() != 0 {
		t.Fatal("cut while no replica answered and none stood idle: the fault may be anyone's")
	}
	bWaits.done(true) // the other replica answers
	a.check()
	if silent.Load() != 1 || other.Load() != 0 {
		t.Fatalf("silent %d, other %d: want the silent replica's stream cut as errSilent", silent.Load(), other.Load())
	}

	// A busy server: its stream being read sends bytes.
	body := &idleBody{began: now()}
	doneReading := a.reads(body)
	_ = a.sent(cut, false)
	advance(2 * time.Second)
	body.last.Store(int64(2 * time.Second))
	b.sent(func(error) {}, false).done(true)
	a.check()
	if silent.Load() != 1 {
		t.Fatal("cut a stream of a server whose other stream sends bytes")
	}
	doneReading()
	// Its queue moves: an earlier request has its headers.
	earlier := a.sent(func(error) {}, false)
	_ = a.sent(cut, false)
	advance(2 * time.Second)
	earlier.done(true)
	advance(2 * time.Second)
	b.sent(func(error) {}, false).done(true)
	a.check()
	if silent.Load() != 1 {
		t.Fatal("cut a stream of a server whose queue moves")
	}
	// The one request in flight: the other replica never answered yet,
	// but holds nothing and would take it at once.
	// An idle one never heard from counts after silentAlone stall
	// timeouts; one that answered before, after one.
	pair := NewReplicas()
	lone, idle := testAwaiting(t, clk, time.Second, pair), testAwaiting(t, clk, time.Second, pair)
	_ = lone.sent(cut, false)
	for _, step := range []struct {
		after time.Duration
		want  int64
	}{{time.Second / 2, 1}, {time.Second, 1}, {2 * time.Second, 2}} {
		advance(step.after)
		lone.check()
		if silent.Load() != step.want {
			t.Fatalf("%v after: %d cut as silent, want %d", step.after, silent.Load(), step.want)
		}
	}
	idle.sent(func(error) {}, false).done(true) // answered, and holds nothing
	_ = lone.sent(cut, false)
	advance(time.Second / 2)
	lone.check()
	if silent.Load() != 2 {
		t.Fatal("cut before StallTimeout")
	}
	advance(time.Second)
	lone.check()
	if silent.Load() != 3 {
		t.Fatalf("silent %d: want the one request in flight cut beside an idle replica that answered", silent.Load())
	}
}

// TestIdleServerCutsOvertakenRequests: a request overtaken by a later
// answer is cut at once (errIdle) by a scrape begun after that showing
// nothing running or waiting, plain or streamed; a plain request overtaken
// is not cut without it (a server answers plain requests out of order),
// nor by a busy scrape or one begun before it was overtaken.
func TestIdleServerCutsOvertakenRequests(t *testing.T) {
	clk := newFakeClock()
	now, advance := clk.now, clk.advance
	a := testAwaiting(t, clk, time.Second, nil)
	var idle, other atomic.Int64
	cut := func(cause error) {
		if errors.Is(cause, errIdle) {
			idle.Add(1)
		} else {
			other.Add(1)
		}
	}
	_ = a.sent(cut, true)  // plain
	_ = a.sent(cut, false) // streamed
	before := now()
	advance(time.Second)
	a.sent(func(error) {}, true).done(true) // a later one answered
	a.check()                               // both marked overtaken
	a.load(before, 0, 0)                    // a scrape from before: proves nothing
	advance(time.Millisecond)
	a.load(now(), 1, 0) // busy
	advance(time.Hour / 2)
	a.check()
	if idle.Load() != 0 || other.Load() != 1 {
		t.Fatalf("idle %d, other %d: want the stream cut by the stall rule alone, the plain request left", idle.Load(), other.Load())
	}
	a.load(now(), 0, 0)
	a.check()
	if idle.Load() != 1 {
		t.Fatalf("idle %d: want the plain request cut by an idle scrape after it was overtaken", idle.Load())
	}
}

// TestIdleRuleWaitsItsGrace: a request sent a moment before an idle
// scrape, and overtaken by a shorter one, is not yet counted by a server
// that holds it: it is not cut until it has waited idleGrace.
func TestIdleRuleWaitsItsGrace(t *testing.T) {
	clk := newFakeClock()
	now := clk.now
	a := testAwaiting(t, clk, time.Hour, nil)
	var cuts atomic.Int64
	_ = a.sent(func(error) { cuts.Add(1) }, true)
	clk.advance(100 * time.Millisecond)
	a.sent(func(error) {}, true).done(true) // a later, shorter one answered
	a.check()
	clk.advance(100 * time.Millisecond)
	a.load(now(), 0, 0) // idle: the server has not counted the first yet
	a.check()
	if n := cuts.Load(); n != 0 {
		t.Fatalf("a request sent %v before an idle scrape was cut", 200*time.Millisecond)
	}
	clk.advance(idleGrace)
	a.load(now(), 0, 0) // still idle, the grace over: lost
	a.check()
	if n := cuts.Load(); n != 1 {
		t.Fatalf("%d cut: want the request cut once idle past its grace", n)
	}
}

// TestPlainRequestsLostToARestartAreCut: plain requests queued at a server
// that is replaced on its port (the old process holds their connections)
// are cut once a later request was answered by the new one and its
// /metrics shows it idle, not after endpoint.timeout.
func TestPlainRequestsLostToARestartAreCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	old := mockserver.New(mockserver.Options{Model: "m", MeanTokens: 2000, TokenDelay: 100 * time.Millisecond, MaxRunning: 1, Seed: 1})
	oldCtx, stopOld := context.WithCancel(context.Background())
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.Serve(oldCtx, ln, time.Second) }()
	t.Cleanup(func() { stopOld(); <-oldDone })

	c := New(Options{BaseURL: "http://" + addr + "/v1", StallTimeout: time.Hour})
	c.await.idleGrace = 0 // the requests were sent a moment before the scrape (TestIdleRuleWaitsItsGrace holds the grace)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := Request{Messages: []chat.Message{{Role: "user", Content: "a long answer please"}}}
	req.Model, req.MaxTokens = "m", 30
	first := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Complete(ctx, req, nil)
			first <- err
		}()
	}
	waitUntil(t, "1 running and 2 queued on the old server", func() bool {
		st := old.Stats()
		return st.Running == 1 && st.Waiting == 2
	})
	old.Abandon()
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fresh := mockserver.New(mockserver.Options{Model: "m", MeanTokens: 20, Seed: 2})
	newCtx, stopNew := context.WithCancel(context.Background())
	newDone := make(chan error, 1)
	go func() { newDone <- fresh.Serve(newCtx, ln2, time.Second) }()
	t.Cleanup(func() { stopNew(); <-newDone })

	if _, err := c.Complete(ctx, req, nil); err != nil {
		t.Fatalf("a new request to the new server: %v", err)
	}
	at := time.Now()
	st := fresh.Stats()
	c.ObserveLoad(at, float64(st.Running), float64(st.Waiting))
	lost := 0
	for range 3 {
		err := <-first
		ce := Classify(err)
		switch {
		case err == nil:
		case ce.Cause == CauseStall && errors.Is(err, errIdle) && strings.Contains(ce.Message, "/metrics shows nothing running or waiting"):
			lost++
		default:
			t.Errorf("a first request ended with %v", err)
		}
	}
	if lost < 2 {
		t.Errorf("%d cut as lost, want at least the 2 queued", lost)
	}
}

// TestFailedStreamOvertakesNone: a later stream that failed without its
// headers (refused, reset) says nothing of the queue: an earlier one still
// waiting is not cut for it, however long it waits.
func TestFailedStreamOvertakesNone(t *testing.T) {
	clk := newFakeClock()
	a := testAwaiting(t, clk, time.Second, nil)
	var cuts atomic.Int64
	_ = a.sent(func(error) { cuts.Add(1) }, false)
	a.sent(func(error) {}, false).done(false) // failed without headers
	a.check()
	clk.advance(time.Hour)
	a.check()
	a.load(a.now(), 0, 0)
	a.check()
	if n := cuts.Load(); n != 0 {
		t.Fatalf("%d cut: a stream that failed without headers overtook the one waiting", n)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// fakeClock is a watch's clock that the test moves; the watch's own timer
// reads it too, hence the atomic.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(1e18)
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// testAwaiting is a watch on clk whose timer stops with the test.
func testAwaiting(t *testing.T, clk *fakeClock, stall time.Duration, peers *Replicas) *awaiting {
	t.Helper()
	a := newAwaiting(stall, nil, peers)
	a.now = clk.now
	t.Cleanup(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.timer != nil {
			a.timer.Stop()
		}
	})
	return a
}
