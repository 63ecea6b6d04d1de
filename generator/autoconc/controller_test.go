package autoconc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// simServer is a server curve for the controller: a KV cache that holds
// kvFits requests (above that they wait, and past preemptAbove in flight
// they are preempted every second), and steps that slow with the batch,
// so throughput rises and flattens: its knee is at kvFits.
type simServer struct {
	kvFits, preemptAbove int
	batchScale           float64
	clock                time.Time // injected: one second per sample
	gen, preempt         float64
	noise                *rand.Rand // nil: exact; else each window's tokens off by up to ±10%
}

func (s *simServer) sample(limit, inFlight int) Reading {
	s.clock = s.clock.Add(time.Second)
	running := min(limit, s.kvFits)
	window := 100 * float64(running) / (1 + float64(running)/s.batchScale)
	if s.noise != nil {
		window *= 0.9 + 0.2*s.noise.Float64()
	}
	s.gen += window
	if limit > s.preemptAbove {
		s.preempt += float64(limit - s.preemptAbove)
	}
	return Reading{At: s.clock, InFlight: inFlight, Tokens: s.gen, Server: promscrape.Sample{
		At: s.clock, Preemptions: s.preempt,
		Running: float64(running), Waiting: float64(limit - running),
		KVCacheUsage: float64(running) / float64(s.kvFits) * 0.93, HasKV: true,
	}}
}

// drive feeds n samples at the controller's own limit (all of it in
// flight) and returns the limits and reasons it chose.
func drive(c *Controller, s *simServer, n int) (limits []int, reasons []string) {
	for range n {
		d := c.Observe(s.sample(c.Limit(), c.Limit()))
		limits = append(limits, d.Limit)
		if d.Moved {
			reasons = append(reasons, d.Reason)
		}
	}
	return limits, reasons
}

func TestAutoSettlesAtTheKnee(t *testing.T) {
	for _, knee := range []int{40, 100, 160} {
		s := &simServer{kvFits: knee, preemptAbove: knee + knee/20, batchScale: 400, clock: time.Unix(0, 0)}
		settleWithin(t, s, knee)
	}
}

// TestAutoSettlesDespiteNoise: each window's throughput off by up to ±10%
// (a fixed seed per case: the same draws every run).
func TestAutoSettlesDespiteNoise(t *testing.T) {
	for seed := range uint64(10) {
		s := &simServer{kvFits: 100, preemptAbove: 105, batchScale: 400, clock: time.Unix(0, 0), noise: rand.New(rand.NewPCG(seed, 1))}
		settleWithin(t, s, 100)
	}
}

// settleWithin drives a controller against s for 200 samples and fails
// unless its limit stays within 20% of knee from sample 40 on.
func settleWithin(t *testing.T, s *simServer, knee int) {
	t.Helper()
	c := New(Options{Ceiling: 400})
	limits, reasons := drive(c, s, 200)
	lo, hi := knee*8/10, knee*12/10
	settled := -1
	for i, l := range limits {
		if l < lo || l > hi {
			settled = -1
		} else if settled < 0 {
			settled = i
		}
	}
	t.Logf("knee %d: settled within 20%% from sample %d; moves: %s", knee, settled, strings.Join(reasons, " | "))
	if settled < 0 || settled > 40 {
		t.Errorf("knee %d: the limit did not stay within [%d, %d] from sample 40 on: %v", knee, lo, hi, limits)
	}
}

func TestAutoBacksOffOnPreemptions(t *testing.T) {
	s := &simServer{kvFits: 1000, preemptAbove: 20, batchScale: 1e9, clock: time.Unix(0, 0)}
	c := New(Options{Ceiling: 400, Start: 32})
	c.Observe(s.sample(32, 32))
	if d := c.Observe(s.sample(32, 32)); d.Moved {
		t.Errorf("the first interval (the pool filling) was judged: %+v", d)
	}
	d := c.Observe(s.sample(32, 32))
	if !d.Moved || d.Limit != 25 || d.Reason != "back off: 12 preemptions" {
		t.Errorf("after 12 preemptions at 32: %+v, want 25 and the reason", d)
	}
	// The next sample still sees the tail of 32 (preemptions): a cut is
	// not judged on its first sample.
	if d := c.Observe(s.sample(32, 25)); d.Moved {
		t.Errorf("first sample after a cut moved: %+v", d)
	}
}

func TestAutoBacksOffOnAFullCacheOrAQueue(t *testing.T) {
	at := time.Unix(0, 0)
	c := New(Options{Ceiling: 400, Start: 100})
	c.Observe(Reading{At: at, InFlight: 100})
	c.Observe(Reading{At: at.Add(time.Second), InFlight: 100})
	d := c.Observe(Reading{At: at.Add(2 * time.Second), InFlight: 100, Tokens: 1000, Server: promscrape.Sample{KVCacheUsage: 0.97, HasKV: true}})
	if d.Limit != 80 || d.Reason != "back off: KV cache 97% full" {
		t.Errorf("full cache: %+v", d)
	}
	c = New(Options{Ceiling: 400, Start: 100})
	c.Observe(Reading{At: at, InFlight: 100})
	c.Observe(Reading{At: at.Add(time.Second), InFlight: 100})
	d = c.Observe(Reading{At: at.Add(2 * time.Second), InFlight: 100, Tokens: 1000, Server: promscrape.Sample{Running: 64, Waiting: 36}})
	if d.Limit != 90 || d.Reason != "back off: 36 waiting in the server's queue" {
		t.Errorf("queue: %+v", d)
	}
}

func TestAutoHoldsWhenTheLimitIsNotReached(t *testing.T) {
	s := &simServer{kvFits: 1000, preemptAbove: 1000, batchScale: 1e9, clock: time.Unix(0, 0)}
	c := New(Options{Ceiling: 400})
	for range 10 {
		if d := c.Observe(s.sample(5, 5)); d.Moved {
			t.Fatalf("grew with 5 of %d in flight: %+v", c.Limit(), d)
		}
	}
	// The first reading at the limit measured the pool filling up.
	if d := c.Observe(s.sample(16, 16)); d.Moved || d.Reason != "measuring at 16" {
		t.Errorf("the first reading with all 16 in flight: %+v, want it measured first", d)
	}
	if d := c.Observe(s.sample(16, 16)); !d.Moved || d.Limit != 24 || !strings.HasPrefix(d.Reason, "grow: queue empty") {
		t.Errorf("all 16 in flight, nothing waiting: %+v, want a growth to 24", d)
	}
}

func TestAutoStaysUnderTheCeiling(t *testing.T) {
	s := &simServer{kvFits: 1000, preemptAbove: 1000, batchScale: 1e9, clock: time.Unix(0, 0)}
	c := New(Options{Ceiling: 50})
	limits, _ := drive(c, s, 40)
	if last := limits[len(limits)-1]; last != 50 {
		t.Errorf("knee above the ceiling: settled at %d, want 50 (%v)", last, limits)
	}
	if d := c.Observe(s.sample(50, 50)); d.Moved || d.Reason != "hold: at the ceiling" {
		t.Errorf("at the ceiling: %+v", d)
	}
	if c := New(Options{Ceiling: 8}); c.Limit() != 8 {
		t.Errorf("a ceiling under the start: starts at %d, want 8", c.Limit())
	}
}

// TestAutoServerRestart: a preemption counter that fell to at most half
// of what it was is a restarted server counting from zero: what it
// counted since is new trouble, and a counter back at zero is none.
func TestAutoServerRestart(t *testing.T) {
	at := time.Unix(0, 0)
	for _, tc := range []struct {
		after float64
		want  string
	}{{0, "grow: queue empty"}, {3, "back off: 3 preemptions"}} {
		c := New(Options{Ceiling: 400, Start: 16})
		c.Observe(Reading{At: at, InFlight: 16, Server: promscrape.Sample{Preemptions: 50}})
		c.Observe(Reading{At: at.Add(time.Second), InFlight: 16, Tokens: 100, Server: promscrape.Sample{Preemptions: 50}})
		d := c.Observe(Reading{At: at.Add(2 * time.Second), InFlight: 16, Tokens: 200, Server: promscrape.Sample{Preemptions: tc.after}})
		if d.Reason != tc.want || len(d.Ignored) > 0 {
			t.Errorf("preemptions 50, then %g: %+v, want %q", tc.after, d, tc.want)
		}
	}
}

// TestImpossibleFiguresSteerNothing: a server figure that cannot be (a KV
// cache usage in percent, or +Inf, which once read as a full cache cut the
// limit to 1; NaN; a negative gauge or counter; a counter a little lower
// than before, which no restart explains) is ignored: the controller
// decides exactly as it does on the same server without it, and each
// reading that has it names it in Decision.Ignored.
func TestImpossibleFiguresSteerNothing(t *testing.T) {
	for _, tc := range []struct {
		name, metric, why string
		spoil             func(*promscrape.Sample)
	}{
		{"KV in percent", promscrape.MetricKVCacheUsage, "percent", func(s *promscrape.Sample) { s.KVCacheUsage = 45 }},
		{"KV +Inf", promscrape.MetricKVCacheUsage, "within 0..1", func(s *promscrape.Sample) { s.KVCacheUsage = math.Inf(1) }},
		{"KV NaN", promscrape.MetricKVCacheUsage, "within 0..1", func(s *promscrape.Sample) { s.KVCacheUsage = math.NaN() }},
		{"KV negative", promscrape.MetricKVCacheUsage, "within 0..1", func(s *promscrape.Sample) { s.KVCacheUsage = -0.2 }},
		{"old KV name in percent", promscrape.MetricGPUCacheUsage, "percent", func(s *promscrape.Sample) {
			s.KVCacheUsage, s.Found = 97, map[string]bool{promscrape.MetricGPUCacheUsage: true}
		}},
		{"waiting +Inf", promscrape.MetricWaiting, "finite", func(s *promscrape.Sample) { s.Waiting = math.Inf(1) }},
		{"waiting NaN", promscrape.MetricWaiting, "finite", func(s *promscrape.Sample) { s.Waiting = math.NaN() }},
		{"running negative", promscrape.MetricRunning, "not negative", func(s *promscrape.Sample) { s.Running = -3 }},
		{"preemptions NaN", promscrape.MetricPreemptions, "finite", func(s *promscrape.Sample) { s.Preemptions = math.NaN() }},
		{"preemptions +Inf", promscrape.MetricPreemptions, "finite", func(s *promscrape.Sample) { s.Preemptions = math.Inf(1) }},
		{"preemptions negative", promscrape.MetricPreemptions, "not negative", func(s *promscrape.Sample) { s.Preemptions = -1 }},
		{"preemptions a little lower", promscrape.MetricPreemptions, "does not go down", func(s *promscrape.Sample) { s.Preemptions = 990 }},
	} {
		run := func(spoil bool) (limits []int, ignored [][]Ignored) {
			s := &simServer{kvFits: 1000, preemptAbove: 2000, batchScale: 400, clock: time.Unix(0, 0)}
			c := New(Options{Ceiling: 400})
			for i := range 30 {
				r := s.sample(c.Limit(), c.Limit())
				r.Server.Preemptions = 1000 // a server that preempted before the run
				if spoil && i >= 2 && i%2 == 0 {
					tc.spoil(&r.Server)
				}
				d := c.Observe(r)
				limits, ignored = append(limits, d.Limit), append(ignored, d.Ignored)
			}
			return limits, ignored
		}
		want, _ := run(false)
		got, ignored := run(true)
		if !slices.Equal(got, want) {
			t.Errorf("%s: limits %v, want %v (as without it)", tc.name, got, want)
		}
		for i, ig := range ignored {
			spoilt := i >= 2 && i%2 == 0
			if spoilt != (len(ig) == 1) || spoilt && (ig[0].Metric != tc.metric || !strings.Contains(ig[0].String(), tc.why)) {
				t.Errorf("%s: reading %d ignored %v, want %s (%s) on every second reading from the third", tc.name, i, ig, tc.metric, tc.why)
				break
			}
		}
	}
}

// TestAutoGrowsNoFurtherThanTheCacheHolds: the KV cache grows with the
// requests running, so a growth stops where it would reach KVFull, before
// any preemption.
func TestAutoGrowsNoFurtherThanTheCacheHolds(t *testing.T) {
	at := time.Unix(0, 0)
	c := New(Options{Ceiling: 400, Start: 80})
	c.Observe(Reading{At: at, InFlight: 80})
	c.Observe(Reading{At: at.Add(time.Second), InFlight: 80})
	d := c.Observe(Reading{At: at.Add(2 * time.Second), InFlight: 80, Tokens: 1000, Server: promscrape.Sample{KVCacheUsage: 0.76, HasKV: true}})
	if d.Limit != 100 {
		t.Errorf("at 80 with the cache 76%% full: grew to %d, want 100 (95%% full), not 120", d.Limit)
	}
	c.Observe(Reading{At: at.Add(3 * time.Second), InFlight: 100, Tokens: 2000, Server: promscrape.Sample{KVCacheUsage: 0.946, HasKV: true}})
	d = c.Observe(Reading{At: at.Add(4 * time.Second), InFlight: 100, Tokens: 3500, Server: promscrape.Sample{KVCacheUsage: 0.946, HasKV: true}})
	if d.Moved || d.Reason != "hold: at knee (KV cache 95% full)" {
		t.Errorf("at 100 with the cache 94.6%% full: %+v, want a hold", d)
	}
}

// healthy is a server's counters across calls of observe: tokens rising
// by 1,000 a second.
type healthy struct {
	at       time.Time
	gen, pre float64
}

// observe feeds c n samples one second apart with running and waiting
// requests, the KV cache at kv and preemptPerSample new preemptions each,
// at the controller's own limit in flight, and returns the decisions.
func (h *healthy) observe(c *Controller, n int, running, waiting, kv, preemptPerSample float64) []Decision {
	var out []Decision
	for range n {
		h.at = h.at.Add(time.Second)
		h.gen += 1000
		h.pre += preemptPerSample
		out = append(out, c.Observe(Reading{At: h.at, InFlight: c.Limit(), Tokens: h.gen, Server: promscrape.Sample{
			Preemptions: h.pre, Running: running, Waiting: waiting, HasKV: true, KVCacheUsage: kv}}))
	}
	return out
}

// TestQueueBelowItsThresholdIsNoBackOff: a few requests waiting in the
// server's queue (under 5% of the limit, and never fewer than 2) are the
// scheduler's churn, not a limit past the knee: neither a controller at 100
// with 4 waiting nor one at 16 with 2 waiting backs off.
func TestQueueBelowItsThresholdIsNoBackOff(t *testing.T) {
	for _, tc := range []struct{ limit, waiting int }{{100, 4}, {16, 2}} {
		c := New(Options{Ceiling: 512, Start: tc.limit})
		h := &healthy{at: time.Unix(0, 0)}
		for _, d := range h.observe(c, 6, float64(tc.limit), float64(tc.waiting), 0.3, 0) {
			if strings.Contains(d.Reason, "waiting in the server's queue") {
				t.Errorf("limit %d with %d waiting: %q; that queue is under the threshold", tc.limit, tc.waiting, d.Reason)
			}
		}
	}
}

// TestLimitNeverBelowOne: a controller at limit 1 fed preemptions, then a
// 97% full cache, then a queue with nothing running, stays at 1: a limit
// of 0 would stop the run.
func TestLimitNeverBelowOne(t *testing.T) {
	c := New(Options{Ceiling: 64, Start: 1})
	h := &healthy{at: time.Unix(0, 0)}
	var ds []Decision
	ds = append(ds, h.observe(c, 4, 1, 0, 0.3, 2)...)
	ds = append(ds, h.observe(c, 4, 1, 0, 0.97, 0)...)
	ds = append(ds, h.observe(c, 4, 0, 30, 0.3, 0)...)
	for _, d := range ds {
		if d.Limit < 1 || c.Limit() < 1 {
			t.Fatalf("limit %d (%q): the controller went below 1", d.Limit, d.Reason)
		}
	}
}

// endSim is a server driven request by request, as the pool drives it:
// the limit's requests in flight (a new one as soon as one ends, none
// while more than the limit are), answers of 100 to 400 tokens (a fixed
// seed), every token taking step x (1 + running/400) s, at most kvFits
// running (the rest wait, and past preemptAbove in flight they are
// preempted every second), so an answer spans several readings. The
// client's count moves with every token (streamed) or only when an answer
// ends (atEnd: a plain request's count, or a server that counts at the
// end).
type endSim struct {
	kvFits, preemptAbove int
	step                 float64
	atEnd                bool
	rng                  *rand.Rand
	clock                time.Time
	left                 []float64 // tokens to go of each request in flight, in the order sent
	size                 []float64 // each one's length
	tokens, answers, pre float64
}

// read runs the server for one second at limit and reads it.
func (s *endSim) read(limit int) Reading {
	const parts = 20
	for range parts {
		for len(s.left) < limit {
			n := float64(100 + s.rng.IntN(301))
			s.left, s.size = append(s.left, n), append(s.size, n)
		}
		running := min(len(s.left), s.kvFits)
		perToken := s.step * (1 + float64(running)/400)
		made := 1.0 / parts / perToken
		for i := 0; i < min(len(s.left), s.kvFits); i++ {
			step := math.Min(made, s.left[i])
			s.left[i] -= step
			if !s.atEnd {
				s.tokens += step
			}
			if s.left[i] > 0 {
				continue
			}
			s.answers++
			if s.atEnd {
				s.tokens += s.size[i]
			}
			s.left, s.size = slices.Delete(s.left, i, i+1), slices.Delete(s.size, i, i+1)
			i--
		}
	}
	s.clock = s.clock.Add(time.Second)
	if limit > s.preemptAbove {
		s.pre += float64(limit - s.preemptAbove)
	}
	running := min(len(s.left), s.kvFits)
	return Reading{At: s.clock, InFlight: len(s.left), Tokens: s.tokens, Answers: s.answers, Server: promscrape.Sample{
		At: s.clock, Preemptions: s.pre, Running: float64(running), Waiting: float64(len(s.left) - running),
		KVCacheUsage: float64(running) / float64(s.kvFits) * 0.93, HasKV: true,
	}}
}

// TestAutoSettlesOnTokensCountedAtTheEnd: the client learns an answer's
// tokens only when it ends (a plain request), and an answer takes 2 to 8
// readings, so that at 16 in flight a reading sees 3 answers end on
// average, a burst or none.
// Told so (TokensAtEnd), the controller settles within 20% of the knee, as
// it does on a count that moves with every streamed token; a controller
// that judged each reading's tokens would call the bursts a knee.
func TestAutoSettlesOnTokensCountedAtTheEnd(t *testing.T) {
	const knee = 128
	for _, atEnd := range []bool{false, true} {
		s := &endSim{kvFits: knee, preemptAbove: knee + knee/20, step: 0.02, atEnd: atEnd,
			rng: rand.New(rand.NewPCG(3, 1)), clock: time.Unix(0, 0)}
		c := New(Options{Ceiling: 400, TokensAtEnd: atEnd})
		var limits []int
		var moves []string
		for range 600 {
			d := c.Observe(s.read(c.Limit()))
			limits = append(limits, d.Limit)
			if d.Moved {
				moves = append(moves, fmt.Sprintf("%d: %s", d.Limit, d.Reason))
			}
		}
		lo, hi := knee*8/10, knee*12/10
		settled := -1
		for i, l := range limits {
			if l < lo || l > hi {
				settled = -1
			} else if settled < 0 {
				settled = i
			}
		}
		t.Logf("tokens at the end %v: settled within 20%% of %d from reading %d, at %d; moves: %s", atEnd, knee, settled, limits[len(limits)-1], strings.Join(moves, " | "))
		if settled < 0 || settled > 200 {
			t.Errorf("tokens at the end %v: the limit did not stay within [%d, %d] from reading 200 on: %v", atEnd, lo, hi, limits)
		}
	}
}
