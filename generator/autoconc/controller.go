package autoconc

// concurrency: auto. A Controller is fed the server's own metrics of
// one endpoint (vLLM's /metrics, read by internal/promscrape) at a steady
// interval, with the number in flight and the limit it set, and answers
// the next limit and why. It is a pure value: no clock of its own (the
// samples carry their time), no I/O; the runner's loop scrapes, asks it
// and sets the engine's limit (the sum over endpoints, once there are
// several: one controller per metrics source).
//
// How it decides, in order, at each sample:
//
//  1. preemptions since the last sample, or a KV cache at least KVFull
//     used: back off (the server is past its knee: it throws work away,
//     or will at the next growth) to the limit before the last growth,
//     or multiplicatively when the trouble did not follow a growth, and
//     remember the limit as too high;
//  2. requests waiting in the server's queue (more than a few): back off
//     to what the server runs; more in flight would only wait there;
//  3. the first sample after a move is not judged (the pipeline is
//     refilling), nor one where the limit is not reached (the dataset,
//     not the server, sets the pace);
//  4. else compare generation throughput with the one measured at the
//     limit before the last growth: still rising by at least Gain of the
//     growth (a growth of a tenth must bring 3% more with the default
//     0.3: past the knee, more in flight only adds latency; "no longer"
//     is judged on two samples at least, one noisy window is not
//     enough): grow (x1.5 until the first trouble, then by a tenth, never
//     past 95% of a limit found too high, nor past the limit at which the
//     KV cache, growing with it, would reach KVFull); no longer rising: the knee is
//     behind, go back to the smaller limit and hold. After ProbeAfter/2
//     samples held it tries above a growth that did not pay again (that
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
	ProbeAfter int     // samples held at the knee before a probe upwards: default 60
}

// Controller decides one endpoint's concurrency from its metrics.
type Controller struct {
	o     Options
	limit int

	prev     promscrape.Sample
	havePrev bool
	fresh    bool // the last sample was the first at the current limit
	grew     bool // the last move was upwards
	before   int  // the limit before the last move
	slow     bool // slow start: grow by half until the first trouble

	base      float64 // throughput at baseLimit, measured before the last growth
	baseLimit int
	tooHigh   int // the lowest limit found past the knee (trouble); 0: none
	noGain    int // a limit whose growth did not pay; 0: none
	held      int // samples held at the knee

	// The throughput at the current limit, over every judged sample
	// since it was set: a verdict that a growth did not pay waits for
	// two, so one noisy window does not undo it.
	measTokens, measTime float64
	measN                int
}

// Decision is what a sample decided.
type Decision struct {
	Limit  int
	Moved  bool
	Reason string // "grow: queue empty, throughput +12%", "back off: 3 preemptions", "hold: at knee"
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
	return &Controller{o: o, limit: o.Start, slow: true, fresh: true}
}

// Limit is the limit in force.
func (c *Controller) Limit() int { return c.limit }

// Observe takes one scrape of the endpoint's metrics and the requests in
// flight to it now, and returns the limit to set and why.
func (c *Controller) Observe(s promscrape.Sample, inFlight int) Decision {
	if !c.havePrev {
		c.prev, c.havePrev = s, true
		return c.hold("measuring")
	}
	dt := s.At.Sub(c.prev.At).Seconds()
	if dt <= 0 {
		return c.hold("measuring")
	}
	// A counter that went down is a restarted server: nothing since.
	tokens := math.Max(s.GenerationTokens-c.prev.GenerationTokens, 0)
	preempted := int(math.Max(s.Preemptions-c.prev.Preemptions, 0))
	c.prev = s
	fresh := c.fresh
	c.fresh = false
	if !fresh {
		c.measTokens += tokens
		c.measTime += dt
		c.measN++
	}
	rate := c.measTokens / math.Max(c.measTime, 1e-9)

	// Trouble right after a cut is the tail of the limit before it.
	judge := !fresh || c.grew
	switch {
	case judge && preempted > 0:
		return c.backOff(fmt.Sprintf("back off: %d %s", preempted, plural(preempted, "preemption", "preemptions")), c.o.Backoff)
	case judge && s.HasKV && s.KVCacheUsage >= c.o.KVFull:
		return c.backOff(fmt.Sprintf("back off: KV cache %.0f%% full", 100*s.KVCacheUsage), c.o.Backoff)
	case judge && s.Waiting > math.Max(2, float64(c.limit)/20):
		c.tooHigh = c.limit
		c.slow = false
		to := max(int(s.Running), int(float64(c.limit)*0.9))
		return c.move(to, fmt.Sprintf("back off: %.0f waiting in the server's queue", s.Waiting))
	case fresh:
		return c.hold(fmt.Sprintf("measuring at %d", c.limit))
	case inFlight < c.limit*9/10:
		return c.hold(fmt.Sprintf("hold: limit not reached (%d in flight)", inFlight))
	}

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
	c.measTokens, c.measTime, c.measN = 0, 0, 0
	return Decision{Limit: to, Moved: true, Reason: why}
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
}

// Record is State in status.json (concurrency_auto).
type Record struct {
	Limit   int       `json:"limit"`
	Ceiling int       `json:"ceiling"`
	Reason  string    `json:"reason"` // why the limit last moved
	Moves   int       `json:"moves"`
	MovedAt time.Time `json:"moved_at,omitzero"`
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

// Record is the state now; nil on a nil State (a fixed concurrency).
func (a *State) Record() *Record {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return &Record{Limit: a.limit, Ceiling: a.ceiling, Reason: a.reason, Moves: a.moves, MovedAt: a.at}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
