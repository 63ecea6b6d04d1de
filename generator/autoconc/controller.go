package autoconc

// concurrency: auto. A Controller is fed a Reading of one endpoint at a
// steady interval: the server's own metrics (vLLM's /metrics, read by
// internal/promscrape) for its queue, KV cache and preemptions, and the
// client's own counts there (requests in flight, tokens received, answers
// completed). It answers the next limit and why. It is a pure value: no
// clock of its own (the readings carry their time), no I/O; the runner's
// loop scrapes, counts, asks it and sets the engine's limit (the sum over
// endpoints, once there are several: one controller per endpoint).
//
// Throughput is the client's own token count, not the server's
// vllm:generation_tokens_total: a server may add to that counter only when
// a request ends (llm-d-inference-sim does, and has no counter before the
// first end), so that a window of a few seconds sees a burst or nothing,
// while the client counts every streamed delta as it arrives. A run that
// does not stream learns an answer's tokens only at its end too
// (Options.TokensAtEnd): then a measurement starts only once as many
// answers ended after the move as the limit (those in flight at the move
// have mostly left), and is judged only over at least twice the limit's
// answers, so that the bursts of answers ending together average out.
//
// A server figure that cannot be what it claims (a KV cache usage outside
// 0..1, as a server reporting percent sends; NaN or Inf; a negative gauge
// or counter; a counter that went down by less than a restart would) is
// ignored: Decision.Ignored names it, and it steers nothing.
//
// How it decides, in order, at each reading:
//
//  1. preemptions since the last reading, or a KV cache at least KVFull
//     used: back off (the server is past its knee: it throws work away,
//     or will at the next growth) to the limit before the last growth,
//     or multiplicatively when the trouble did not follow a growth, and
//     remember the limit as too high;
//  2. requests waiting in the server's queue (more than a few): back off
//     to what the server runs; more in flight would only wait there;
//  3. a reading where the limit is not reached is not judged (the
//     dataset, not the server, sets the pace), nor one before the
//     throughput at the limit is measured (the first reading after a move
//     or after the limit was not reached: the pipeline is refilling; with
//     TokensAtEnd, until the answers above have ended);
//  4. else compare generation throughput with the one measured at the
//     limit before the last growth: still rising by at least Gain of the
//     growth (a growth of a tenth must bring 3% more with the default
//     0.3: past the knee, more in flight only adds latency; "no longer"
//     is judged on two readings at least, one noisy window is not
//     enough): grow (x1.5 until the first trouble, then by a tenth, never
//     past 95% of a limit found too high, nor past the limit at which the
//     KV cache, growing with it, would reach KVFull); no longer rising: the knee is
//     behind, go back to the smaller limit and hold. After ProbeAfter/2
//     readings held it tries above a growth that did not pay again (that
//     window may have been noise), after ProbeAfter above a limit that
//     brought trouble (which cost the server work), so the controller
//     follows a server whose knee moved (longer prompts, another model).

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// DefaultInterval is how often the runner looks at the server under
// concurrency: auto (progress.interval when that is shorter).
const DefaultInterval = 2 * time.Second

// StartLimit is the limit concurrency: auto starts at under ceiling: 16, or
// the ceiling when lower. The engine starts there and so does the
// controller (Options.Start).
func StartLimit(ceiling int) int { return min(16, max(ceiling, 1)) }

// Options tune an Controller; zero fields take the defaults.
type Options struct {
	Ceiling    int     // most in flight; required
	Start      int     // first limit: default 16, or Ceiling when lower
	Min        int     // least in flight: default 1
	KVFull     float64 // KV cache usage that counts as full: default 0.95
	Gain       float64 // throughput rise a growth must bring, as a share of its own relative size: default 0.3
	Backoff    float64 // factor of a back-off on preemptions or a full cache: default 0.8
	ProbeAfter int     // readings held at the knee before a probe upwards: default 60
	// TokensAtEnd says that Reading.Tokens moves only when an answer ends
	// (the run does not stream): throughput is then measured over answers
	// ended, not over one reading (see above).
	TokensAtEnd bool
	// ByReplies steers by the endpoint's answers alone (replies.go): its
	// server serves no /metrics. Decrease (default 0.75), Cooldown
	// (default 5 s), LatencyBound (default 2) and Headroom (default 1.25)
	// tune it.
	ByReplies    bool
	Decrease     float64
	Cooldown     time.Duration
	LatencyBound float64
	Headroom     float64
}

// Reading is one look at an endpoint: its server's metrics and the
// client's own counts there.
type Reading struct {
	At       time.Time         // when the client's counts were taken
	Server   promscrape.Sample // queue, running, KV cache, preemptions; its GenerationTokens are not read
	InFlight int               // requests in flight to the endpoint now
	Tokens   float64           // tokens the client received from the endpoint so far
	Answers  float64           // answers the endpoint completed so far
	Replies  Replies           // what its answers said (Options.ByReplies steers by them)
}

// Ignored is a server figure a reading cannot have; it steers nothing.
type Ignored struct {
	Metric string // as promscrape names it, e.g. vllm:kv_cache_usage_perc
	Value  float64
	Why    string // e.g. "a usage is a fraction within 0..1 (a server reporting percent?)"
}

func (ig Ignored) String() string { return fmt.Sprintf("%s = %g: %s", ig.Metric, ig.Value, ig.Why) }

// Controller decides one endpoint's concurrency from its readings.
type Controller struct {
	o     Options
	limit int

	prev     Reading
	havePrev bool
	pre      float64 // the last preemption counter kept
	havePre  bool
	fresh    bool // the last reading was the first at the current limit
	grew     bool // the last move was upwards
	before   int  // the limit before the last move
	slow     bool // slow start: grow by half until the first trouble

	base      float64 // throughput at baseLimit, measured before the last growth
	baseLimit int
	tooHigh   int // the lowest limit found past the knee (trouble); 0: none
	noGain    int // a limit whose growth did not pay; 0: none
	held      int // readings held at the knee

	// The throughput at the current limit, over every reading measured
	// since it was set: a verdict that a growth did not pay waits for
	// two, so one noisy window does not undo it. Before a measurement
	// starts, skipOne leaves out one reading (the pipeline refilling), or,
	// with TokensAtEnd, refill answers must end first.
	measTokens, measTime, measAnswers float64
	measN                             int
	skipOne                           bool
	refill                            float64

	replies replyState // Options.ByReplies
}

// Decision is what a reading decided.
type Decision struct {
	Limit  int
	Moved  bool
	Reason string // "grow: queue empty, throughput +12%", "back off: 3 preemptions", "hold: at knee"
	// Ignored are the reading's server figures that cannot be (see
	// Ignored); they steered nothing.
	Ignored []Ignored
}

// New returns a controller starting at o.Start.
func New(o Options) *Controller {
	o.Ceiling = max(o.Ceiling, 1)
	if o.Start <= 0 {
		o.Start = 16
	}
	o.Start = min(o.Start, o.Ceiling)
	if o.Min <= 0 {
		o.Min = 1
	}
	if o.KVFull <= 0 {
		o.KVFull = 0.95
	}
	if o.Gain <= 0 {
		o.Gain = 0.3
	}
	if o.Backoff <= 0 || o.Backoff >= 1 {
		o.Backoff = 0.8
	}
	if o.ProbeAfter <= 0 {
		o.ProbeAfter = 60
	}
	o = o.replyDefaults()
	c := &Controller{o: o, limit: o.Start, slow: true, fresh: true}
	c.remeasure()
	return c
}

// Limit is the limit in force.
func (c *Controller) Limit() int { return c.limit }

// Observe takes one reading of the endpoint and returns the limit to set
// and why.
func (c *Controller) Observe(r Reading) Decision {
	if c.o.ByReplies {
		return c.byReplies(r)
	}
	s, preempted, ignored := c.sane(r.Server)
	d := c.decide(r, s, preempted)
	d.Ignored = ignored
	return d
}

// sane returns s without the figures it cannot have (each in ignored),
// and the preemptions since the last reading. A preemption counter below
// the last one kept is a restarted server, counting from zero, when it is
// at most half of it; a smaller step down is no restart, and is ignored.
func (c *Controller) sane(s promscrape.Sample) (_ promscrape.Sample, preempted int, ignored []Ignored) {
	bad := func(metric string, v float64, why string) {
		ignored = append(ignored, Ignored{Metric: metric, Value: v, Why: why})
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, g := range []struct {
		metric string
		v      *float64
	}{{promscrape.MetricRunning, &s.Running}, {promscrape.MetricWaiting, &s.Waiting}} {
		switch {
		case !finite(*g.v):
			bad(g.metric, *g.v, "a count of requests is a finite number")
			*g.v = 0
		case *g.v < 0:
			bad(g.metric, *g.v, "a count of requests is not negative")
			*g.v = 0
		}
	}
	if s.HasKV && !(s.KVCacheUsage >= 0 && s.KVCacheUsage <= 1) {
		metric := promscrape.MetricKVCacheUsage
		if !s.Found[metric] && s.Found[promscrape.MetricGPUCacheUsage] {
			metric = promscrape.MetricGPUCacheUsage
		}
		why := "a usage is a fraction within 0..1"
		if s.KVCacheUsage > 1 && s.KVCacheUsage <= 100 {
			why += " (a server reporting percent?)"
		}
		bad(metric, s.KVCacheUsage, why)
		s.HasKV, s.KVCacheUsage = false, 0
	}
	switch p := s.Preemptions; {
	case !finite(p) || p < 0:
		bad(promscrape.MetricPreemptions, p, "a counter is a finite number, not negative")
	case !c.havePre || p >= c.pre:
		if c.havePre {
			preempted = int(math.Min(p-c.pre, 1e9))
		}
		c.pre, c.havePre = p, true
	case p <= c.pre/2:
		preempted = int(p) // since the restart
		c.pre = p
	default:
		bad(promscrape.MetricPreemptions, p, fmt.Sprintf("a counter does not go down (it was %g; a restart starts it again from zero)", c.pre))
	}
	return s, preempted, ignored
}

func (c *Controller) decide(r Reading, s promscrape.Sample, preempted int) Decision {
	if !c.havePrev {
		c.prev, c.havePrev = r, true
		return c.hold("measuring")
	}
	dt := r.At.Sub(c.prev.At).Seconds()
	if dt <= 0 {
		return c.hold("measuring")
	}
	rate, fresh := c.measure(r, dt)
	if d, ok := c.trouble(r, s, preempted, fresh); ok {
		return d
	}
	return c.grow(rate, s)
}

// measure takes reading r, dt seconds after the last, into the measurement
// at the current limit, and returns the throughput measured so far and
// whether the limit was just moved (fresh).
func (c *Controller) measure(r Reading, dt float64) (rate float64, fresh bool) {
	// The client's counts only grow.
	tokens := math.Max(r.Tokens-c.prev.Tokens, 0)
	answers := math.Max(r.Answers-c.prev.Answers, 0)
	c.prev = r
	fresh = c.fresh
	c.fresh = false
	switch {
	case c.refill > 0:
		// These answers were sent before the measurement could start.
		c.refill -= answers
	case c.skipOne:
		c.skipOne = false
	default:
		c.measTokens += tokens
		c.measTime += dt
		c.measAnswers += answers
		c.measN++
	}
	return c.measTokens / math.Max(c.measTime, 1e-9), fresh
}

// trouble is the decision when the server says the limit is too high
// (preemptions, a full KV cache, a queue), or when the measurement says
// nothing yet of the limit; ok false: neither, the limit may grow.
func (c *Controller) trouble(r Reading, s promscrape.Sample, preempted int, fresh bool) (d Decision, ok bool) {
	// Trouble right after a cut is the tail of the limit before it.
	judge := !fresh || c.grew
	switch {
	case judge && preempted > 0:
		return c.backOff(fmt.Sprintf("back off: %d %s", preempted, plural(preempted, "preemption", "preemptions")), c.o.Backoff), true
	case judge && s.HasKV && s.KVCacheUsage >= c.o.KVFull:
		return c.backOff(fmt.Sprintf("back off: KV cache %.0f%% full", 100*s.KVCacheUsage), c.o.Backoff), true
	case judge && s.Waiting > math.Max(2, float64(c.limit)/20):
		c.tooHigh = c.limit
		c.slow = false
		to := max(int(math.Min(s.Running, float64(c.o.Ceiling))), int(float64(c.limit)*0.9))
		return c.move(to, fmt.Sprintf("back off: %.0f waiting in the server's queue", s.Waiting)), true
	case r.InFlight < c.limit*9/10:
		// What this measured is the dataset's pace, not the limit's.
		c.remeasure()
		return c.hold(fmt.Sprintf("hold: limit not reached (%d in flight)", r.InFlight)), true
	case !c.measured():
		return c.hold(fmt.Sprintf("measuring at %d", c.limit)), true
	}
	return Decision{}, false
}

// grow is the decision at a limit measured without trouble at throughput
// rate: back to the limit before when the growth did not pay, else up by a
// step the knee, the KV cache and the ceiling allow, or hold.
func (c *Controller) grow(rate float64, s promscrape.Sample) Decision {
	if step := float64(c.limit)/float64(c.baseLimit) - 1; c.base > 0 && rate < c.base*(1+c.o.Gain*step) {
		if c.measN < 2 {
			return c.hold(fmt.Sprintf("measuring at %d", c.limit))
		}
		// This growth did not pay: the knee is at or below the limit
		// before it.
		gain := rate/c.base - 1
		from := c.limit
		c.slow, c.held = false, 0
		c.noGain = from
		c.base = 0
		return c.move(c.baseLimit, fmt.Sprintf("at knee: throughput %+.0f%% from %d to %d, back to %d", 100*gain, c.baseLimit, from, c.baseLimit))
	}
	next := c.limit + max(1, c.limit/10)
	if c.slow {
		next = c.limit + max(1, c.limit/2)
	}
	if c.tooHigh > 0 {
		next = min(next, c.tooHigh*95/100)
	}
	if c.noGain > 0 {
		next = min(next, c.noGain-1)
	}
	// The KV cache grows with the requests running: a growth that would
	// fill it is not made (the server would preempt), whatever the
	// throughput says.
	kvCap := math.MaxInt
	if s.HasKV && s.KVCacheUsage > 0 {
		kvCap = int(float64(c.limit) * c.o.KVFull / s.KVCacheUsage)
		next = min(next, kvCap)
	}
	next = min(next, c.o.Ceiling)
	if next <= c.limit {
		c.held++
		why := "hold: at the ceiling"
		switch {
		case c.limit >= c.o.Ceiling:
		case kvCap <= c.limit:
			why = fmt.Sprintf("hold: at knee (KV cache %.0f%% full)", 100*s.KVCacheUsage)
		case c.tooHigh > 0 && c.tooHigh*95/100 <= c.limit:
			why = fmt.Sprintf("hold: at knee (trouble at %d)", c.tooHigh)
		default:
			why = fmt.Sprintf("hold: at knee (no gain at %d)", c.noGain)
		}
		// Look above again: soon after a growth that did not pay, later
		// after trouble.
		if c.held >= c.o.ProbeAfter/2 {
			c.noGain = 0
		}
		if c.held >= c.o.ProbeAfter {
			c.tooHigh, c.held = 0, 0
		}
		return c.hold(why)
	}
	why := "grow: queue empty"
	if c.base > 0 {
		why += fmt.Sprintf(", throughput %+.0f%%", 100*(rate/c.base-1))
	}
	c.base, c.baseLimit = rate, c.limit
	return c.move(next, why)
}

// backOff cuts the limit: back to where it was when the trouble follows
// a growth (that limit was fine), else by factor.
func (c *Controller) backOff(why string, factor float64) Decision {
	c.noGain = 0
	to := int(float64(c.limit) * factor)
	if c.grew && c.before < c.limit {
		to = max(to, c.before)
	}
	c.tooHigh = c.limit
	c.slow, c.base, c.held = false, 0, 0
	return c.move(to, why)
}

func (c *Controller) move(to int, why string) Decision {
	to = min(max(to, c.o.Min), c.o.Ceiling)
	if to == c.limit {
		return c.hold(why)
	}
	c.grew, c.before = to > c.limit, c.limit
	c.limit, c.fresh = to, true
	c.remeasure()
	return Decision{Limit: to, Moved: true, Reason: why}
}

// remeasure starts the throughput measurement at the current limit
// again: after the next reading, or, with TokensAtEnd, once as many
// answers as the limit have ended.
func (c *Controller) remeasure() {
	c.measTokens, c.measTime, c.measAnswers, c.measN = 0, 0, 0, 0
	c.skipOne, c.refill = true, 0
	if c.o.TokensAtEnd {
		c.skipOne, c.refill = false, float64(c.limit)
	}
}

// measured reports whether the throughput at the current limit is
// measured: over one reading, or, with TokensAtEnd, over two at least
// and twice the limit's answers ended.
func (c *Controller) measured() bool {
	if c.o.TokensAtEnd {
		return c.measN >= 2 && c.measAnswers >= float64(2*c.limit)
	}
	return c.measN >= 1
}

func (c *Controller) hold(why string) Decision {
	return Decision{Limit: c.limit, Reason: why}
}

// State is what concurrency: auto shows: the limit in force, the
// ceiling, and why the limit last moved. Safe from any goroutine.
type State struct {
	mu      sync.Mutex
	limit   int
	ceiling int
	reason  string
	moves   int
	at      time.Time
	steer   string
}

// Record is State in status.json (concurrency_auto).
type Record struct {
	Limit   int       `json:"limit"`
	Ceiling int       `json:"ceiling"`
	Reason  string    `json:"reason"` // why the limit last moved
	Moves   int       `json:"moves"`
	MovedAt time.Time `json:"moved_at,omitzero"`
	// Steering says which endpoints are steered by their answers, and why
	// (Loop.Steering); empty: every one by its /metrics.
	Steering string `json:"steering,omitempty"`
}

// NewState starts at limit, under ceiling.
func NewState(limit, ceiling int) *State {
	return &State{limit: limit, ceiling: ceiling, reason: "start"}
}

// Moved records a move of the limit.
func (a *State) Moved(limit int, reason string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.limit, a.reason, a.at = limit, reason, at
	a.moves++
}

// Steer records what steers the limit (Loop.Steering).
func (a *State) Steer(steering string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.steer = steering
}

// Record is the state now; nil on a nil State (a fixed concurrency).
func (a *State) Record() *Record {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return &Record{Limit: a.limit, Ceiling: a.ceiling, Reason: a.reason, Moves: a.moves, MovedAt: a.at, Steering: a.steer}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
