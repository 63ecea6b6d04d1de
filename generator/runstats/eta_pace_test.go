package runstats

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// paceGate is an endpoint paced by a token bucket on the test's clock, as
// the pool's pacer is: requests reserve their share and wait for it.
type paceGate struct {
	mu      sync.Mutex
	clk     *fakeClock
	lim     *rate.Limiter
	waiting int64
}

func (g *paceGate) State() GateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GateState{Paced: g.waiting, PacedBy: "requests",
		PacePerSec: float64(g.lim.Limit()), PaceReady: g.lim.TokensAt(g.clk.now())}
}

// pacedRun drives a run of keys records, turns requests each, through
// slots requests in flight paced to perMinute with the bucket's burst, on
// the test's clock: each request is answered after a 0.5 s first token
// at 40 tokens a second, its length 100 to 400 tokens. It returns the
// progress events (a snapshot a second) and when the run ended.
func pacedRun(t *testing.T, keys, turns, slots, perMinute, burst int) ([]Snapshot, time.Time) {
	t.Helper()
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(int64(keys))
	s.SetEndpoints([]string{"http://paced"})
	es := s.EndpointLedgers(1)[0]
	g := &paceGate{clk: clk, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), burst)}
	es.SetGate(g)

	type req struct {
		tr           *Tracker
		start, sent  time.Time
		length, got  int
		turn, total  int // turns answered, their tokens
		origin       time.Time
		waitingCount bool
	}
	const step = 100 * time.Millisecond
	const ttft = 500 * time.Millisecond
	const tokPerStep = 4 // 40 tokens a second
	var flight []*req
	next, seed := 0, uint64(7)
	length := func() int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return 100 + int(seed>>33)%301
	}
	send := func(r *req) {
		now := clk.now()
		r.sent = now.Add(g.lim.ReserveN(now, 1).DelayFrom(now))
		r.length, r.got = length(), 0
		es.AddInFlight(1) // picked before its wait, as the router does
		r.waitingCount = r.sent.After(now)
		if r.waitingCount {
			g.waiting++
		}
	}
	var events []Snapshot
	for tick := 0; ; tick++ {
		now := clk.now()
		g.mu.Lock()
		for next < keys && len(flight) < slots {
			r := &req{tr: s.Begin(), start: now, origin: now}
			r.tr.SendingTo(es)
			send(r)
			flight = append(flight, r)
			next++
		}
		kept := flight[:0]
		for _, r := range flight {
			if r.waitingCount && !now.Before(r.sent) {
				r.waitingCount = false
				g.waiting--
			}
			if now.Before(r.sent.Add(ttft)) {
				kept = append(kept, r)
				continue
			}
			n := min(tokPerStep, r.length-r.got)
			r.tr.Delta(n)
			r.got += n
			if r.got < r.length {
				kept = append(kept, r)
				continue
			}
			es.Ended(s.start, now, true, true, int64(r.length))
			es.AddInFlight(-1)
			r.tr.TurnDone() // as the pool does after every turn, the last too
			r.total += r.length
			if r.turn++; r.turn < turns {
				send(r)
				kept = append(kept, r)
				continue
			}
			r.tr.Done(Outcome{CompletionTokens: r.total, UsageKnown: true, Deltas: r.total,
				TTFT: ttft, Latency: now.Sub(r.sent), Attempts: turns}) // one attempt a turn, as the pool counts
		}
		flight = kept
		g.mu.Unlock()
		if next == keys && len(flight) == 0 {
			return events, now
		}
		if tick%10 == 0 {
			events = append(events, s.Snapshot())
		}
		clk.advance(step)
		if tick > 1e6 {
			t.Fatal("the simulated run never ended")
		}
	}
}

// The check of issue 41: a run paced to 150 requests a minute has an ETA
// within 25% of the time left in at least 80% of its progress events from
// 20% to 80% done; whether the bucket starts with a minute's burst (a
// server's stated x-ratelimit-* limits) or a second's (the configured
// endpoint.max_requests_per_minute), and with several turns a record.
func TestStatsETAFollowsPacing(t *testing.T) {
	for _, c := range []struct{ keys, turns, burst int }{
		{400, 1, 150}, {400, 1, 2}, {150, 3, 150},
	} {
		t.Run(fmt.Sprintf("keys=%d,turns=%d,burst=%d", c.keys, c.turns, c.burst), func(t *testing.T) {
			events, end := pacedRun(t, c.keys, c.turns, 64, 150, c.burst)
			var judged, good int
			for _, e := range events {
				done := float64(e.Done) / float64(c.keys)
				if done < 0.2 || done > 0.8 {
					continue
				}
				judged++
				left := end.Sub(e.At).Seconds()
				if !e.ETAKnown {
					t.Logf("at %.0f%% done: no ETA, %.0fs left", 100*done, left)
					continue
				}
				if math.Abs(e.ETA.Seconds()-left) <= 0.25*left {
					good++
				} else {
					t.Logf("at %.0f%% done: eta %v, %.0fs left", 100*done, e.ETA, left)
				}
				// An error bar it has earned: never ±0s with tens of
				// seconds to go, and the time left within three of it.
				if left > 10 && e.ETAError < time.Second {
					t.Errorf("at %.0f%% done, %.0fs left: eta %v ±%v", 100*done, left, e.ETA, e.ETAError)
				}
				if d := math.Abs(e.ETA.Seconds() - left); d > 3*e.ETAError.Seconds()+1 {
					t.Errorf("at %.0f%% done: eta %v ±%v but %.0fs left", 100*done, e.ETA, e.ETAError, left)
				}
			}
			if judged < 10 {
				t.Fatalf("only %d progress events from 20%% to 80%% done", judged)
			}
			t.Logf("ETA within 25%% of the time left in %d of %d events", good, judged)
			if good*5 < judged*4 {
				t.Errorf("ETA within 25%% of the time left in %d of %d events, want 80%%", good, judged)
			}
		})
	}
}
