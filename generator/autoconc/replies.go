package autoconc

// concurrency: auto where the server serves no /metrics (a hosted API, a
// proxy): the Controller steers by what the endpoint's answers say
// (Options.ByReplies), an additive increase and a multiplicative decrease
// as TCP's. At each reading, in order:
//
//  1. answers 429 since the last reading: cut the limit by Decrease
//     (x0.75), at most once a cooldown (Cooldown, or the mean latency when
//     longer: the 429s just after a cut answer requests sent before it);
//  2. the reading's mean latency (over minJudged answers at least) past
//     LatencyBound times the lowest measured: cut likewise (the server
//     queues what it cannot run);
//  3. far past the ceiling the stated limits allow: down to it (no cut);
//  4. no answer since the last reading, or the limit not reached (the
//     dataset sets the pace): hold;
//  5. else grow: x2 until the first cut (a slow start, so a large ceiling
//     is reached in seconds), then by a constant step (Ceiling/64, at
//     least 1), never past the limits' ceiling.
//
// The limits' ceiling is Little's law: the requests the stated limits let
// go a second (requests a minute / 60, or tokens a minute / 60 over a
// request's mean cost at admission, the lower) times the mean latency,
// with Headroom for the spread of latencies, within 1..Ceiling, once the
// limits bind (a request waited for its share: before, the bucket's first
// minute lets more go than the rate). A request
// that waits for its share of the limits (pool's pacer) holds a slot, so
// the headroom keeps the limits, not the concurrency, the bound. Latency
// is the request-seconds spent at the server over the attempts ended
// (Little's law again: no request is timed), so that wait is not in it.

import (
	"fmt"
	"math"
	"time"
)

// Replies are what an endpoint's answers said since the run began, and
// the limits in force there.
type Replies struct {
	Ended   int64   // attempts sent that ended, answered or not
	Limited int64   // of them, those answered 429
	Waited  int64   // requests that waited for their share of the limits (they bind)
	Busy    float64 // request-seconds at the server: ΔBusy/ΔEnded is the mean latency
	// RequestsPerMinute and TokensPerMinute are the limits in force
	// (stated by the server, else configured; 0: none); Cost is a
	// request's mean tokens as counted at admission.
	RequestsPerMinute, TokensPerMinute, Cost float64
}

// minJudged is the fewest answers whose mean latency a reading judges.
const minJudged = 8

// replyState is what steering by replies remembers.
type replyState struct {
	prev    Replies
	have    bool
	latency float64   // mean latency, seconds, smoothed over readings; 0: none yet
	lowest  float64   // the lowest judged reading's mean latency; 0: none yet
	cutAt   time.Time // the last cut; zero: none
	bound   bool      // requests waited for their share of the limits
}

func (o Options) replyDefaults() Options {
	if o.Decrease <= 0 || o.Decrease >= 1 {
		o.Decrease = 0.75
	}
	if o.Cooldown <= 0 {
		o.Cooldown = 5 * time.Second
	}
	if o.LatencyBound <= 1 {
		o.LatencyBound = 2
	}
	if o.Headroom < 1 {
		o.Headroom = 1.25
	}
	return o
}

func (c *Controller) byReplies(r Reading) Decision {
	st, n := &c.replies, r.Replies
	if !st.have {
		st.prev, st.have = n, true
		return c.hold("measuring")
	}
	p := st.prev
	st.prev = n
	ended, limited := max(n.Ended-p.Ended, 0), max(n.Limited-p.Limited, 0)
	st.bound = st.bound || n.Waited > p.Waited
	window := 0.0 // this reading's mean latency when judged
	if ended > 0 {
		lat := max(n.Busy-p.Busy, 0) / float64(ended)
		if st.latency == 0 {
			st.latency = lat
		}
		st.latency += 0.5 * (lat - st.latency)
		if ended >= minJudged {
			window = lat
		}
	}
	cooling := !st.cutAt.IsZero() && r.At.Sub(st.cutAt) < max(c.o.Cooldown, duration(st.latency))
	switch {
	case limited > 0 && cooling:
		return c.hold(fmt.Sprintf("hold: %d answered 429, cooling down after a cut", limited))
	case limited > 0:
		return c.cut(r.At, fmt.Sprintf("back off: %d of %d answers 429", limited, ended))
	case window > 0 && st.lowest > 0 && window > c.o.LatencyBound*st.lowest && !cooling:
		return c.cut(r.At, fmt.Sprintf("back off: latency %s, over %gx the lowest %s", duration(window), c.o.LatencyBound, duration(st.lowest)))
	}
	if window > 0 && (st.lowest == 0 || window < st.lowest) {
		st.lowest = window
	}
	ceil, at := c.limitsCeiling(n)
	switch {
	case c.limit > ceil+max(1, ceil/4):
		return c.move(ceil, "down to "+at)
	case ended == 0:
		return c.hold("measuring")
	case r.InFlight < c.limit*9/10:
		return c.hold(fmt.Sprintf("hold: limit not reached (%d in flight)", r.InFlight))
	}
	next := c.limit + max(1, c.o.Ceiling/64)
	if c.slow {
		next = c.limit * 2
	}
	if next = min(next, ceil); next <= c.limit {
		return c.hold("hold: at " + at)
	}
	return c.move(next, "grow: answers fine")
}

// cut is a multiplicative decrease, which starts a cooldown and ends the
// slow start.
func (c *Controller) cut(at time.Time, why string) Decision {
	c.replies.cutAt, c.slow = at, false
	return c.move(int(float64(c.limit)*c.o.Decrease), why)
}

// limitsCeiling is the most in flight the stated limits allow at the mean
// latency (Little's law, with Headroom), and what it is, for the reasons.
func (c *Controller) limitsCeiling(n Replies) (int, string) {
	perSec, by := math.Inf(1), ""
	if n.RequestsPerMinute > 0 {
		perSec, by = n.RequestsPerMinute/60, fmt.Sprintf("%.0f requests a minute", n.RequestsPerMinute)
	}
	if n.TokensPerMinute > 0 && n.Cost > 0 && n.TokensPerMinute/60/n.Cost < perSec {
		perSec, by = n.TokensPerMinute/60/n.Cost, fmt.Sprintf("%.0f tokens a minute at %.0f a request", n.TokensPerMinute, n.Cost)
	}
	lat := c.replies.latency
	ceil := math.Ceil(perSec * lat * c.o.Headroom)
	if by == "" || lat <= 0 || !c.replies.bound || !(ceil < float64(c.o.Ceiling)) {
		return c.o.Ceiling, fmt.Sprintf("the ceiling %d", c.o.Ceiling)
	}
	limit := max(int(ceil), c.o.Min)
	return limit, fmt.Sprintf("the limits' ceiling %d (%s, %s mean latency)", limit, by, duration(lat))
}

// duration is seconds as a Duration, to the millisecond.
func duration(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second)).Round(time.Millisecond)
}
