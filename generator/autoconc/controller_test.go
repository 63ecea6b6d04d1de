package autoconc

import (
	"math/rand/v2"
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

func (s *simServer) sample(limit int) promscrape.Sample {
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
	return promscrape.Sample{
		At: s.clock, GenerationTokens: s.gen, Preemptions: s.preempt,
		Running: float64(running), Waiting: float64(limit - running),
		KVCacheUsage: float64(running) / float64(s.kvFits) * 0.93, HasKV: true,
	}
}

// drive feeds n samples at the controller's own limit (all of it in
// flight) and returns the limits and reasons it chose.
func drive(c *Controller, s *simServer, n int) (limits []int, reasons []string) {
	for range n {
		d := c.Observe(s.sample(c.Limit()), c.Limit())
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
	c.Observe(s.sample(32), 32)
	if d := c.Observe(s.sample(32), 32); d.Moved {
		t.Errorf("the first interval (the pool filling) was judged: %+v", d)
	}
	d := c.Observe(s.sample(32), 32)
	if !d.Moved || d.Limit != 25 || d.Reason != "back off: 12 preemptions" {
		t.Errorf("after 12 preemptions at 32: %+v, want 25 and the reason", d)
	}
	// The next sample still sees the tail of 32 (preemptions): a cut is
	// not judged on its first sample.
	if d := c.Observe(s.sample(32), 25); d.Moved {
		t.Errorf("first sample after a cut moved: %+v", d)
	}
}

func TestAutoBacksOffOnAFullCacheOrAQueue(t *testing.T) {
	at := time.Unix(0, 0)
	c := New(Options{Ceiling: 400, Start: 100})
	c.Observe(promscrape.Sample{At: at}, 100)
	c.Observe(promscrape.Sample{At: at.Add(time.Second)}, 100)
	d := c.Observe(promscrape.Sample{At: at.Add(2 * time.Second), GenerationTokens: 1000, KVCacheUsage: 0.97, HasKV: true}, 100)
	if d.Limit != 80 || d.Reason != "back off: KV cache 97% full" {
		t.Errorf("full cache: %+v", d)
	}
	c = New(Options{Ceiling: 400, Start: 100})
	c.Observe(promscrape.Sample{At: at}, 100)
	c.Observe(promscrape.Sample{At: at.Add(time.Second)}, 100)
	d = c.Observe(promscrape.Sample{At: at.Add(2 * time.Second), GenerationTokens: 1000, Running: 64, Waiting: 36}, 100)
	if d.Limit != 90 || d.Reason != "back off: 36 waiting in the server's queue" {
		t.Errorf("queue: %+v", d)
	}
}

func TestAutoHoldsWhenTheLimitIsNotReached(t *testing.T) {
	s := &simServer{kvFits: 1000, preemptAbove: 1000, batchScale: 1e9, clock: time.Unix(0, 0)}
	c := New(Options{Ceiling: 400})
	for range 10 {
		if d := c.Observe(s.sample(5), 5); d.Moved {
			t.Fatalf("grew with 5 of %d in flight: %+v", c.Limit(), d)
		}
	}
	if d := c.Observe(s.sample(16), 16); !d.Moved || d.Limit != 24 || !strings.HasPrefix(d.Reason, "grow: queue empty") {
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
	if d := c.Observe(s.sample(50), 50); d.Moved || d.Reason != "hold: at the ceiling" {
		t.Errorf("at the ceiling: %+v", d)
	}
	if c := New(Options{Ceiling: 8}); c.Limit() != 8 {
		t.Errorf("a ceiling under the start: starts at %d, want 8", c.Limit())
	}
}

// TestAutoServerRestart: counters that go down (a restarted server) count
// as nothing new, not as a collapse or a negative preemption count.
func TestAutoServerRestart(t *testing.T) {
	at := time.Unix(0, 0)
	c := New(Options{Ceiling: 400, Start: 16})
	c.Observe(promscrape.Sample{At: at, GenerationTokens: 1e6, Preemptions: 50}, 16)
	d := c.Observe(promscrape.Sample{At: at.Add(time.Second), GenerationTokens: 10, Preemptions: 0}, 16)
	if d.Limit < 16 {
		t.Errorf("after a restart: %+v", d)
	}
}

// TestAutoGrowsNoFurtherThanTheCacheHolds: the KV cache grows with the
// requests running, so a growth stops where it would reach KVFull, before
// any preemption.
func TestAutoGrowsNoFurtherThanTheCacheHolds(t *testing.T) {
	at := time.Unix(0, 0)
	c := New(Options{Ceiling: 400, Start: 80})
	c.Observe(promscrape.Sample{At: at}, 80)
	c.Observe(promscrape.Sample{At: at.Add(time.Second)}, 80)
	d := c.Observe(promscrape.Sample{At: at.Add(2 * time.Second), GenerationTokens: 1000, KVCacheUsage: 0.76, HasKV: true}, 80)
	if d.Limit != 100 {
		t.Errorf("at 80 with the cache 76%% full: grew to %d, want 100 (95%% full), not 120", d.Limit)
	}
	c.Observe(promscrape.Sample{At: at.Add(3 * time.Second), GenerationTokens: 2000, KVCacheUsage: 0.946, HasKV: true}, 100)
	d = c.Observe(promscrape.Sample{At: at.Add(4 * time.Second), GenerationTokens: 3500, KVCacheUsage: 0.946, HasKV: true}, 100)
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
		out = append(out, c.Observe(promscrape.Sample{At: h.at, GenerationTokens: h.gen, Preemptions: h.pre,
			Running: running, Waiting: waiting, HasKV: true, KVCacheUsage: kv}, c.Limit()))
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
