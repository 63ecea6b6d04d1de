package pace

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/wire"
)

// The tokens a request costs are what a provider counts at admission: its
// prompt's estimate, learnt from the answers' usage, plus max_tokens; the
// stated limits and what remains become the pacer's buckets.
func TestPacerFollowsTheStatedLimits(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	p := New(Limits{RequestsPerMinute: 60}, UnsaidHold(0, 0), func() time.Time { return now }, false)
	req := wire.Request{Messages: []chat.Message{{Role: "user", Content: "0123456789012345"}}}
	req.MaxTokens = 100
	bytes, total := p.Cost(req)
	if bytes != 20 || total != 106 {
		t.Fatalf("cost: %d bytes, %d tokens; want 20 and 106 (bytes/4+1, plus max_tokens)", bytes, total)
	}
	for range 50 {
		p.Answered(wire.Limits{}, bytes, 10) // the server counts a token for two bytes
	}
	if _, total := p.Cost(req); total != 110 {
		t.Fatalf("cost after usage said 10 prompt tokens: %d, want 110", total)
	}
	p.Answered(wire.Limits{Tokens: wire.Limit{Known: true, Limit: 6000, Remaining: 50}}, 0, 0)
	if got := p.tok.TokensAt(now); got != 50 {
		t.Fatalf("token bucket after remaining 50: %v", got)
	}
	if p.req.Burst() != 1 {
		t.Fatalf("configured 60 a minute: burst %d, want a second's worth, 1", p.req.Burst())
	}
	hold, ok, _ := p.Limited(&wire.Error{Status: 429, RetryAfter: time.Hour})
	if !ok || hold != maxPaceHold {
		t.Fatalf("429 with Retry-After 1h: hold %v (pacing %v), want %v", hold, ok, maxPaceHold)
	}
	if hold, ok, _ := p.Limited(&wire.Error{Status: 429}); !ok || hold != time.Second {
		t.Fatalf("a 429 that says nothing of when to come back: hold %v (pacing %v), want 1s of pacing", hold, ok)
	}
	now = now.Add(outageAfter)
	if _, _, said := p.Limited(&wire.Error{Status: 429, RetryAfter: time.Second}); said == "" {
		t.Fatal("10 minutes of nothing but 429s not said")
	}
	if _, out := p.OutSince(); !out {
		t.Fatal("10 minutes of nothing but 429s: not out")
	}
	p.Answered(wire.Limits{}, 0, 0)
	if _, out := p.OutSince(); out {
		t.Fatal("answered, and still out")
	}
}

// The pacing wait ends with the run's context (a drain, a signal), and the
// share it reserved goes back.
func TestPacingWaitEndsWithTheContext(t *testing.T) {
	t.Parallel()
	p := New(Limits{RequestsPerMinute: 1}, UnsaidHold(0, 0), time.Now, false) // one request, then one a minute
	if err := p.Wait(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, 1) }()
	for {
		if n, by := p.State(); n == 1 {
			if by != BindRequests {
				t.Fatalf("waiting for requests' share, binds %q", by)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("wait after cancel: %v", err)
	}
	if n, _ := p.State(); n != 0 {
		t.Fatalf("%d still waiting", n)
	}
	if got := p.req.Tokens(); got < -0.01 {
		t.Fatalf("the canceled wait's share not given back: %v left", got)
	}
}

// TestPacerSignals: what concurrency: auto reads of the answers where a
// server serves no /metrics: request-seconds at the server (two requests
// sent, one ending after 2 s, the other after 3: 5), attempts ended and
// those answered 429, the requests that waited for their share, the
// limits in force and a request's mean cost at admission.
func TestPacerSignals(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	p := New(Limits{RequestsPerMinute: 120, TokensPerMinute: 6000}, UnsaidHold(0, 0), func() time.Time { return clock }, true)
	req := wire.Request{Messages: []chat.Message{{Role: "user", Content: "four"}}}
	req.MaxTokens = 10
	_, cost := p.Cost(req) // (4+4)/4 + 1 + 10
	ctx := context.Background()
	for range 2 {
		if err := p.Wait(ctx, cost); err != nil {
			t.Fatal(err)
		}
	}
	// A third waits for its share (a burst of 2 requests): cancelled while
	// it waits, it is counted as waited and never as sent.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Wait(wctx, cost) }()
	for p.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled wait returned nil")
	}
	clock = clock.Add(2 * time.Second)
	p.Limited(nil)
	clock = clock.Add(time.Second)
	p.Limited(&wire.Error{Status: 429})
	got := p.Signals()
	want := Signals{Ended: 2, Limited: 1, Waited: 1, Busy: 5, RequestsPerMinute: 120, TokensPerMinute: 6000, Cost: float64(cost)}
	if got != want {
		t.Errorf("signals %+v, want %+v", got, want)
	}
}

// A 429 that says nothing of when to come back is pacing as well: its
// hold doubles with each round of them (the 429s of requests in flight
// during a hold are one round), bounded, and starts again after an answer.
func TestAnUnsaid429BacksOffByRounds(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	p := New(Limits{}, UnsaidHold(time.Second, 5*time.Second), func() time.Time { return now }, false)
	bare := &wire.Error{Status: 429}
	step := func(want time.Duration) {
		t.Helper()
		hold, ok, _ := p.Limited(bare)
		if !ok || hold != want {
			t.Fatalf("hold %v (pacing %v), want %v", hold, ok, want)
		}
	}
	step(time.Second)
	step(time.Second) // in flight during the hold: the same round
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		now = now.Add(time.Minute) // the hold over: a new round
		step(want)
	}
	p.Answered(wire.Limits{}, 0, 0)
	now = now.Add(time.Minute)
	step(time.Second)
}

// A request whose max_tokens and prompt exceed the tokens a minute the
// server states can never be admitted: neverFits says so once a limit is
// stated, and not before.
func TestNeverFitsTheStatedTokenLimit(t *testing.T) {
	t.Parallel()
	p := New(Limits{TokensPerMinute: 5000}, UnsaidHold(0, 0), time.Now, false)
	if _, never, _ := p.NeverFits(20010); never {
		t.Fatal("a configured limit taken for the server's")
	}
	p.Limited(&wire.Error{Status: 429, Limits: wire.Limits{Tokens: wire.Limit{Known: true, Limit: 10000, Remaining: 10000}}})
	if limit, never, first := p.NeverFits(20010); !never || limit != 10000 || !first {
		t.Fatalf("20010 tokens against a stated 10000: limit %d, never %v, first %v", limit, never, first)
	}
	if _, _, first := p.NeverFits(20010); first {
		t.Fatal("a second request that never fits said again")
	}
	if _, never, _ := p.NeverFits(9000); never {
		t.Fatal("9000 tokens against a stated 10000 said never to fit")
	}
}

// allows is the pace the ETA plans with: the requests' limit a second, or
// the tokens' over a request's mean cost where that is less, and what the
// buckets admit now, negative once requests owe their shares.
func TestPacerAllows(t *testing.T) {
	t.Parallel()
	if r, n := (*Pacer)(nil).Allows(); r != 0 || n != 0 {
		t.Errorf("nil pacer allows %v, %v; want 0, 0", r, n)
	}
	clock := time.Unix(0, 0)
	now := func() time.Time { return clock }
	p := New(Limits{RequestsPerMinute: 120}, UnsaidHold(0, 0), now, false)
	if r, n := p.Allows(); r != 2 || n != 2 {
		t.Errorf("120 a minute: allows %v a second, %v ready; want 2, 2 (a second's burst)", r, n)
	}
	for range 3 {
		p.req.ReserveN(clock, 1) // two from the burst, one owed
	}
	if _, n := p.Allows(); n != -1 {
		t.Errorf("after 3 reserved: %v ready, want -1", n)
	}
	clock = clock.Add(time.Second)
	if _, n := p.Allows(); n != 1 {
		t.Errorf("a second later: %v ready, want 1", n)
	}

	// The tokens' limit over a request's mean admission cost, where that
	// is less than the requests' limit.
	for _, tpm := range []int{6000, 600} {
		p := New(Limits{RequestsPerMinute: 120, TokensPerMinute: tpm}, UnsaidHold(0, 0), now, false)
		req := wire.Request{Messages: []chat.Message{{Role: "user", Content: "four"}}}
		req.MaxTokens = 10
		_, cost := p.Cost(req)
		want := min(2, float64(tpm)/60/float64(cost))
		if r, _ := p.Allows(); math.Abs(r-want) > 1e-9 {
			t.Errorf("%d tokens a minute, %d a request: allows %v a second, want %v", tpm, cost, r, want)
		}
	}
}

// A pacer with nothing to do (no limit configured or stated, no 429, no
// Signals asked) counts nothing; the server's first stated limit, or its
// first 429, engages it from that answer on.
func TestPacerEngagesOnlyWhenThereIsWork(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	now := func() time.Time { return clock }
	ctx := context.Background()
	req := wire.Request{Messages: []chat.Message{{Role: "user", Content: "four"}}}
	sendOne := func(p *Pacer, l wire.Limits) {
		t.Helper()
		_, cost := p.Cost(req)
		if err := p.Wait(ctx, cost); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Second)
		p.Answered(l, 8, 2)
		p.Limited(nil)
	}
	idle := New(Limits{}, UnsaidHold(0, 0), now, false)
	counting := New(Limits{}, UnsaidHold(0, 0), now, true)
	for range 3 {
		sendOne(idle, wire.Limits{})
		sendOne(counting, wire.Limits{})
	}
	if s := idle.Signals(); s != (Signals{}) || idle.engaged.Load() {
		t.Errorf("an idle pacer counted %+v (engaged %v)", s, idle.engaged.Load())
	}
	if s := counting.Signals(); s.Ended != 3 || s.Busy != 3 {
		t.Errorf("a pacer asked for Signals counted %+v, want 3 ended, 3 request-seconds", s)
	}
	// The server states a limit of 60 a minute with none left: the next
	// request waits for its share.
	sendOne(idle, wire.Limits{Requests: wire.Limit{Known: true, Limit: 60, Remaining: 0}})
	if !idle.engaged.Load() {
		t.Fatal("a stated limit did not engage the pacer")
	}
	if perSec, _ := idle.Allows(); perSec != 1 {
		t.Errorf("after a stated limit of 60 a minute it allows %v a second, want 1", perSec)
	}
	other := New(Limits{}, UnsaidHold(time.Second, 0), now, false)
	if hold, ok, _ := other.Limited(&wire.Error{Status: 429}); !ok || hold != time.Second || !other.engaged.Load() {
		t.Errorf("a first 429: hold %v, pacing %v, engaged %v", hold, ok, other.engaged.Load())
	}
}
