package pool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// testRouter is a router over n endpoints whose gates can be closed by
// hand (no prober runs: the tests set the state).
func testRouter(n int) *router {
	stats := runstats.NewStats(nil)
	ledgers := stats.EndpointLedgers(n)
	r := &router{eps: make([]*endpoint, n), stats: stats, up: make(chan struct{}), now: time.Now, maxHold: time.Minute, say: func(string) {}}
	for i := range n {
		ep := &endpoint{idx: i, stats: ledgers[i], gate: &outage{now: time.Now}, route: r}
		ledgers[i].SetGate(ep)
		r.eps[i] = ep
	}
	return r
}

// closeGate closes ep's gate by hand, as a failed probe would (no prober
// runs), and tells the router; openGate opens it again.
func closeGate(r *router, ep *endpoint, now time.Time) {
	o := ep.gate
	o.mu.Lock()
	o.back, o.since, o.why = make(chan struct{}), now, "test: closed by hand"
	o.down.Store(true)
	o.mu.Unlock()
	r.changed(ep, true, now)
}

func openGate(r *router, ep *endpoint, now time.Time) {
	o := ep.gate
	o.mu.Lock()
	o.back = nil
	o.down.Store(false)
	o.mu.Unlock()
	r.changed(ep, false, now)
}

func (r *router) indexOf(ep *endpoint) int {
	for i, e := range r.eps {
		if e == ep {
			return i
		}
	}
	return -1
}

// TestRouterPicksFewestInFlight: the endpoint with the fewest requests in
// flight takes the next one; ties go in turn; a closed gate is passed over;
// with every gate closed one is still picked (its failure waits at the
// gates, as with one server).
func TestRouterPicksFewestInFlight(t *testing.T) {
	r := testRouter(3)
	// Ties in turn: 0, 1, 2, then 0 again once each holds one.
	var got []int
	for range 6 {
		got = append(got, r.indexOf(r.pick(nil, prefixChain{}).ep))
	}
	if want := []int{0, 1, 2, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("picks %v, want %v", got, want)
	}
	// Endpoint 1 frees two: it has the fewest and takes the next two.
	r.release(lease{ep: r.eps[1]}, time.Now(), wire.Response{}, nil, nil)
	r.release(lease{ep: r.eps[1]}, time.Now(), wire.Response{}, nil, nil)
	if a, b := r.indexOf(r.pick(nil, prefixChain{}).ep), r.indexOf(r.pick(nil, prefixChain{}).ep); a != 1 || b != 1 {
		t.Errorf("after endpoint 1 freed two, picks %d, %d; want 1, 1", a, b)
	}
	// A closed gate is passed over, however few it has in flight.
	r.eps[2].gate.down.Store(true)
	setInFlight(r.eps[2].stats, 0)
	for range 4 {
		if i := r.indexOf(r.pick(nil, prefixChain{}).ep); i == 2 {
			t.Fatal("picked endpoint 2, whose gate is closed")
		}
	}
	// Every gate closed: one is still picked, the one with the fewest.
	r.eps[0].gate.down.Store(true)
	r.eps[1].gate.down.Store(true)
	if i := r.indexOf(r.pick(nil, prefixChain{}).ep); i != 2 {
		t.Errorf("with every gate closed, picked %d; want 2 (fewest in flight)", i)
	}
}

// TestRouterPrefersHeadroom: an endpoint with its own cap (limit) is
// chosen by the room left under it, so a replica capped at 8 with 6 in
// flight loses to one capped at 32 with 20 in flight.
func TestRouterPrefersHeadroom(t *testing.T) {
	r := testRouter(2)
	r.stats.SetEndpointLimit(0, 8)
	setInFlight(r.eps[0].stats, 6)
	r.stats.SetEndpointLimit(1, 32)
	setInFlight(r.eps[1].stats, 20)
	if i := r.indexOf(r.pick(nil, prefixChain{}).ep); i != 1 {
		t.Errorf("picked %d; want 1 (12 free against 2)", i)
	}
	// Room equal (12 each): in turn.
	r.stats.SetEndpointLimit(0, 18)
	setInFlight(r.eps[1].stats, 20)
	if a, b := r.indexOf(r.pick(nil, prefixChain{}).ep), r.indexOf(r.pick(nil, prefixChain{}).ep); a == b {
		t.Errorf("equal room picked %d twice; want each in turn", a)
	}
	snap := r.stats.Snapshot()
	if snap.Endpoints[0].Limit != 18 {
		t.Errorf("snapshot limit %d, want 18", snap.Endpoints[0].Limit)
	}
}

// TestRouterWaitsForAnyEndpoint: with every gate closed, waitUp returns
// when one opens, and the run counts as down only while all are.
func TestRouterWaitsForAnyEndpoint(t *testing.T) {
	r := testRouter(2)
	now := time.Now()
	closeGate(r, r.eps[0], now)
	if !r.stats.Snapshot().ServerDownSince.IsZero() {
		t.Error("one endpoint of two down: the run shows the server down")
	}
	closeGate(r, r.eps[1], now)
	if r.stats.Snapshot().ServerDownSince.IsZero() {
		t.Error("both endpoints down: the run does not show the server down")
	}
	if st := r.stats.Snapshot().Endpoints[1].DownSince; st.IsZero() {
		t.Error("endpoint 2's down_since is not set")
	}
	done := make(chan error, 1)
	go func() { done <- r.waitUp(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("waitUp returned %v while every endpoint is down", err)
	default:
	}
	openGate(r, r.eps[1], now)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !r.stats.Snapshot().ServerDownSince.IsZero() {
		t.Error("an endpoint is back: the run still shows the server down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closeGate(r, r.eps[1], now)
	if err := r.waitUp(ctx); err == nil {
		t.Error("waitUp with every endpoint down and a cancelled context returned nil")
	}
}

// TestEndpointStateShown: a closed gate shows as down, and as probing while
// its prober asks the server.
func TestEndpointStateShown(t *testing.T) {
	r := testRouter(2)
	gate := r.eps[1].gate
	state := func() string { return r.stats.Snapshot().Endpoints[1].State }
	if got := state(); got != runstats.EndpointUp {
		t.Errorf("open gate: state %q, want up", got)
	}
	gate.down.Store(true)
	if got := state(); got != runstats.EndpointDown {
		t.Errorf("closed gate: state %q, want down", got)
	}
	gate.probing.Store(true)
	if got := state(); got != runstats.EndpointProbing {
		t.Errorf("closed gate being probed: state %q, want probing", got)
	}
}

// fakeProber lists models, or fails.
type fakeProber struct {
	models []string
	err    error
}

func (f fakeProber) Models(context.Context) ([]string, error) { return f.models, f.err }

func (f fakeProber) Complete(context.Context, wire.Request, func(int)) (wire.Response, error) {
	return wire.Response{}, f.err
}

// TestProbeWantsTheModel: with several endpoints a replica that answers
// but lists another model is still down; with one endpoint (no model
// given) any answer opens the gate, as it always did.
func TestProbeWantsTheModel(t *testing.T) {
	ctx := context.Background()
	other := newOutage(ctx, fakeProber{models: []string{"other"}}, "test-model", nil)
	if err := other.probe(ctx); err == nil || !strings.Contains(err.Error(), `not "test-model"`) {
		t.Errorf("probe of a replica serving another model = %v, want an error naming the model", err)
	}
	if err := newOutage(ctx, fakeProber{models: []string{"a", "test-model"}}, "test-model", nil).probe(ctx); err != nil {
		t.Errorf("probe of a replica serving the model = %v", err)
	}
	if err := newOutage(ctx, fakeProber{models: []string{"other"}}, "", nil).probe(ctx); err != nil {
		t.Errorf("one endpoint: probe of a server that answers = %v, want nil", err)
	}
	if err := newOutage(ctx, fakeProber{err: errors.New("connection refused")}, "test-model", nil).probe(ctx); err == nil {
		t.Error("probe of a server that does not answer = nil")
	}
}

// setInFlight sets an endpoint's count in flight, as if n requests were sent to it.
func setInFlight(es *runstats.Endpoint, n int64) { es.AddInFlight(n - es.InFlight()) }

// failingFirst fails the first fails requests of each prompt, on whichever
// endpoint it is, with a 500, then answers; every endpoint shares it.
type failingFirst struct {
	fails int
	mu    sync.Mutex
	seen  map[string]int
}

func (f *failingFirst) Complete(_ context.Context, req wire.Request, _ func(int)) (wire.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	f.mu.Lock()
	f.seen[last]++
	n := f.seen[last]
	f.mu.Unlock()
	if n <= f.fails {
		return wire.Response{}, &wire.Error{Cause: "http_500", Status: 500, Retryable: true, Message: "boom"}
	}
	return wire.Response{Model: req.Model, Content: "answer to " + last, FinishReason: "stop", UsageKnown: true, CompletionTokens: 1}, nil
}

// TestMoveIsUncharged: with max_attempts 2 and two replicas, a prompt that
// fails on one (moved to the other, uncharged) and then on the other (its
// one charged attempt) is asked a third time and answered: the move was
// not the prompt's attempt. Its record counts the two attempts that were.
func TestMoveIsUncharged(t *testing.T) {
	f := &failingFirst{fails: 2, seen: map[string]int{}}
	o := testOptions(1)
	o.Retry = RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	o.Endpoints = []Endpoint{{URL: "a", Client: f}, {URL: "b", Client: f}}
	stats := runstats.NewStats(nil)
	stats.SetEndpoints([]string{"a", "b"})
	eng, err := New(f, stats, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	sum, err := eng.Run(context.Background(), newSliceSource("x"), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if sum.Written != 1 || sum.Failed != 0 {
		t.Fatalf("written %d, failed %d: want the prompt answered at its third request", sum.Written, sum.Failed)
	}
	if r := recordsByID(t, dir)["x"]; r.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (the move not counted)", r.Attempts)
	}
}
