package pool

// Several endpoints: one model served by several replicas (vLLM data
// parallel, or several boxes), endpoint.base_url a list. The router sends
// each request to the healthy endpoint with the fewest requests in flight,
// and gives each endpoint its own outage gate (outage.go): a replica that
// restarts is drained (no request is sent to it while its gate is closed)
// and probed back in while the others carry the load, and a request that
// failed because its endpoint went away goes to another without being
// charged an attempt. With one endpoint all of this is the single gate of
// before: a request that finds the server away waits for it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/synthgen/synthgen/generator/pool/pace"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// Endpoint is one endpoint as the Engine is given it: its URL
// (passwords masked, for figures only) and its client.
type Endpoint struct {
	URL    string
	Client Completer
}

// endpoint is one endpoint of a Run: its client, its gate (nil when the
// client cannot be probed), its ledger, which holds its live counts, and
// its health (health.go), guarded by the router's lock.
type endpoint struct {
	idx    int
	url    string
	client Completer
	gate   *outage
	stats  *runstats.Endpoint
	route  *router
	health health
	pace   *pace.Pacer // its rate limits
}

// State is the endpoint's state as its figures show it (runstats.Gate): down
// while its gate is closed or while it is taken out for its failures,
// probing while its gate's prober or a trial request asks it, with when and
// why.
func (ep *endpoint) State() runstats.GateState {
	st := ep.gateState()
	st.Paced, st.PacedBy = ep.pace.State()
	st.PacePerSec, st.PaceReady = ep.pace.Allows()
	return st
}

// gateState is State but for pacing.
func (ep *endpoint) gateState() runstats.GateState {
	var st runstats.GateState
	if ep.gate.Down() {
		st = runstats.GateState{Down: true, Probing: ep.gate.Probing(), Since: ep.gate.downSince(), Reason: ep.gate.reason()}
	}
	if since, out := ep.pace.OutSince(); out && !st.Down {
		st = runstats.GateState{Down: true, Since: since, Reason: "answers nothing but 429 (rate limited)"}
	}
	if ep.route == nil || !ep.route.several() {
		return st
	}
	ep.route.mu.Lock()
	defer ep.route.mu.Unlock()
	switch h := &ep.health; {
	case st.Down:
	case h.sick:
		st = runstats.GateState{Down: true, Probing: h.trial, Since: h.since, Reason: h.reason}
	case h.held(ep.route.now()):
		st = runstats.GateState{Down: true, Since: h.holdSince, Reason: h.holdWhy}
	}
	return st
}

// headroom is what the router maximizes: with a cap, the requests it may
// still take (limit - in flight); without, minus its requests in flight
// (the fewest wins).
func (ep *endpoint) headroom() int64 {
	n := ep.stats.InFlight()
	if l := ep.stats.Limit(); l > 0 {
		return l - n
	}
	return -n
}

// router picks an endpoint per attempt. It is shared by every slot of one
// Run.
type router struct {
	eps   []*endpoint
	stats *runstats.Stats

	now     func() time.Time
	maxHold time.Duration // the longest a Retry-After holds an endpoint back (max_backoff)
	say     func(string)  // one line to the run's log; never nil
	place   *placer       // placement by prefix (place.go); nil with one endpoint

	mu   sync.Mutex // guards what follows and every endpoint's health
	next int        // where the next pick starts scanning: ties go round robin
	down int        // endpoints whose gate is closed
	// up is closed, and replaced, whenever a gate opens: slots that found
	// every endpoint down wait on it.
	up chan struct{}
}

// newRouter builds the Run's router: the Engine's endpoints, or its one
// client. Each endpoint that can be probed gets its own gate, living as long
// as life.
func (e *Engine) newRouter(life context.Context) *router {
	targets := e.opts.Endpoints
	if len(targets) == 0 {
		targets = []Endpoint{{Client: e.client}}
	}
	ledgers := e.stats.EndpointLedgers(len(targets))
	r := &router{
		eps: make([]*endpoint, len(targets)), stats: e.stats, up: make(chan struct{}),
		now: time.Now, maxHold: e.opts.Retry.MaxBackoff, say: func(string) {},
	}
	if e.opts.Log != nil {
		r.say = func(line string) { fmt.Fprintln(e.opts.Log, line) }
	}
	if len(targets) > 1 {
		r.place = newPlacer(e.opts.Sampling.Count())
	}
	for i, t := range targets {
		ep := &endpoint{idx: i, url: t.URL, client: t.Client, stats: ledgers[i], route: r, pace: newPacer(e.opts.Rate, e.opts.Retry, e.opts.Signals)}
		// With several endpoints, one that comes back serving another
		// model (or one that was down at start, never checked) stays out:
		// the others carry the load. One endpoint keeps the single
		// server's gate: any answer opens it.
		model := ""
		if len(targets) > 1 {
			model = e.opts.Sampling.Model
		}
		ep.gate = newOutage(life, t.Client, model, func(down bool, since time.Time) { r.changed(ep, down, since) })
		if ep.gate != nil && e.probeMin > 0 {
			ep.gate.minBackoff, ep.gate.maxBackoff = e.probeMin, e.probeMin
		}
		ep.stats.SetGate(ep)
		r.eps[i] = ep
	}
	return r
}

// newOutage returns the gate of one endpoint for one Run, or nil when its
// client has no way to ask whether the server is up. With model set, a
// server that lists its models without it counts as down.
func newOutage(life context.Context, c Completer, model string, onChange func(down bool, since time.Time)) *outage {
	p, ok := c.(prober)
	if !ok {
		return nil
	}
	return &outage{
		life: life,
		probe: func(ctx context.Context) error {
			served, err := p.Models(ctx)
			if !serverAnswered(err) {
				return err
			}
			if err == nil && model != "" && len(served) > 0 && !slices.Contains(served, model) {
				return fmt.Errorf("serves %s, not %q", strings.Join(served, ", "), model)
			}
			return nil
		},
		minBackoff: time.Second,
		maxBackoff: 30 * time.Second,
		now:        time.Now,
		onChange:   onChange,
		kick:       make(chan struct{}, 1),
	}
}

// changed is an endpoint's gate closing or opening (called under the gate's
// lock). The run counts as down, for the progress line and status.json,
// while every endpoint is.
func (r *router) changed(ep *endpoint, down bool, since time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if down {
		r.down++
		if r.down == len(r.eps) {
			r.stats.SetServerDown(true, since)
		}
		return
	}
	if r.down == len(r.eps) {
		r.stats.SetServerDown(false, since)
	}
	r.down--
	close(r.up)
	r.up = make(chan struct{})
}

// lease is one attempt's endpoint, as pick chose it; trial marks the one
// request a sick endpoint is sent to find out whether it is well again.
type lease struct {
	ep    *endpoint
	trial bool
	// placed: chosen by prefix (place.go), held the share of the prompt
	// the endpoint was sent before.
	placed bool
	held   float64
}

// pick chooses the endpoint for one attempt and counts it in flight there
// (release ends it). A sick endpoint whose next trial is due takes it, so
// that it is asked again even under full load. Else, among the endpoints
// whose gate is open, that are well, not held back by a Retry-After, and not
// in avoid (the endpoints this prompt just failed on), the one with the most
// headroom (the fewest in flight, or the most room under its own cap), ties
// in turn. With none such it relaxes, in this order: avoid, then health and
// holds (every open gate), then the gates themselves; when every gate is
// closed the attempt fails, as it would have with one server, and its slot
// waits at the gates (waitUp). The endpoint so chosen gives way to one,
// among those the same rule allows, that was sent the longest run of pre's
// leading messages, unless that one is loaded past the bound (place.go).
func (r *router) pick(avoid tried, pre prefixChain) lease {
	if len(r.eps) == 1 {
		ep := r.eps[0]
		ep.stats.AddInFlight(1)
		return lease{ep: ep}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	n := len(r.eps)
	for k := range n {
		i := (r.next + k) % n
		ep := r.eps[i]
		if ep.health.trialDue(now) && !ep.gate.Down() && !avoid.has(i) {
			ep.health.trial = true
			r.next = (i + 1) % n
			ep.stats.AddInFlight(1)
			return lease{ep: ep, trial: true}
		}
	}
	fits := []func(i int, ep *endpoint) bool{
		func(i int, ep *endpoint) bool { return !ep.gate.Down() && ep.health.usable(now) && !avoid.has(i) },
		func(i int, ep *endpoint) bool { return !ep.gate.Down() && ep.health.usable(now) },
		func(i int, ep *endpoint) bool { return !ep.gate.Down() },
		func(int, *endpoint) bool { return true },
	}
	best := -1
	var bestRoom int64
	var fitted func(int, *endpoint) bool
	for _, fit := range fits {
		fitted = fit
		for k := range n {
			i := (r.next + k) % n
			ep := r.eps[i]
			if !fit(i, ep) {
				continue
			}
			if room := ep.headroom(); best < 0 || room > bestRoom {
				best, bestRoom = i, room
			}
		}
		if best >= 0 {
			break
		}
	}
	r.next = (best + 1) % n
	var l lease
	if len(pre.hash) > 0 && r.place != nil {
		l.placed = true
		best, l.held = r.place.choose(pre, r.eps, best, fitted)
	}
	l.ep = r.eps[best]
	l.ep.stats.AddInFlight(1)
	return l
}

// elsewhere reports whether an attempt that failed on the endpoints in
// avoid has another to go to at once: one whose gate is open, well, and not
// held back.
func (r *router) elsewhere(avoid tried) bool {
	if len(r.eps) == 1 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for i, ep := range r.eps {
		if !avoid.has(i) && !ep.gate.Down() && ep.health.usable(now) {
			return true
		}
	}
	return false
}

// release ends an attempt of l, started at the run's time origin (the
// tracker's); resp and err are the attempt's outcome, and fault, when err is
// not nil, whether the failure was the replica's (replicaFault). With
// several endpoints the outcome goes into the endpoint's health: a failing
// endpoint is taken out (unless every other is out too: then the failures
// say nothing of this one), a trial lets it back in or puts the next one off,
// and a Retry-After holds it back for what it asked, at most maxHold.
func (r *router) release(l lease, origin time.Time, resp wire.Response, err error, fault *wire.Error) {
	ep := l.ep
	ep.stats.AddInFlight(-1)
	var tokens int64
	if err == nil {
		tokens = int64(resp.CompletionTokens)
		if !resp.UsageKnown {
			tokens = int64(resp.Chunks)
		}
	}
	ep.stats.Ended(origin, r.stats.Now(), serverAnswered(err), err == nil, tokens)
	if l.placed && err == nil && resp.UsageKnown {
		p := int64(resp.PromptTokens)
		ep.stats.AddPlaced(p, int64(l.held*float64(p)+0.5))
	}
	if len(r.eps) == 1 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	h := &ep.health
	if err != nil && fault == nil {
		// The prompt's failure, not the replica's: a trial it was proves
		// nothing, and the next one may go at once.
		if l.trial {
			h.trial = false
		}
		return
	}
	cause := ""
	if err != nil {
		cause = fault.Cause
		if fault.RetryAfter > 0 {
			h.hold(now, min(fault.RetryAfter, r.maxHold), fault.RetryAfter, cause)
		}
	}
	switch {
	case l.trial && err == nil:
		r.say(fmt.Sprintf("endpoint %s: back in: a trial request succeeded after %s out", ep.url, now.Sub(h.since).Round(time.Second)))
		h.letIn()
	case l.trial:
		h.note(cause)
		h.trialFailed(now)
	case !h.sick:
		h.note(cause)
		if h.failing() && r.othersWellLocked(ep) {
			h.takeOut(now)
			r.say(fmt.Sprintf("endpoint %s: taken out: %s; the others take its requests, and one at a time asks whether it is well again", ep.url, h.reason))
		}
	}
}

// unpick undoes a pick whose request was never sent (its pacing wait
// ended with the run).
func (r *router) unpick(l lease) {
	l.ep.stats.AddInFlight(-1)
	if l.trial {
		r.mu.Lock()
		l.ep.health.trial = false
		r.mu.Unlock()
	}
}

// holdBack holds ep back for d, as a 429 that stated its reset asked
// (package pace): its pacer holds its own requests; with several endpoints the
// others take the new ones meanwhile. said, when not empty, is logged.
func (r *router) holdBack(ep *endpoint, d time.Duration, said string) {
	if said != "" {
		r.say(fmt.Sprintf("endpoint %s: %s", ep.url, said))
	}
	if !r.several() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ep.health.hold(r.now(), d, d, "http_429")
}

// othersWellLocked reports whether some endpoint other than ep takes
// requests: its gate open and it well.
func (r *router) othersWellLocked(ep *endpoint) bool {
	for _, o := range r.eps {
		if o != ep && !o.gate.Down() && !o.health.sick {
			return true
		}
	}
	return false
}

// waitUp returns once some endpoint's gate is open, or with ctx's error.
// With one endpoint it is the wait for that server to come back.
func (r *router) waitUp(ctx context.Context) error {
	for {
		r.mu.Lock()
		if r.down < len(r.eps) {
			r.mu.Unlock()
			return nil
		}
		up := r.up
		r.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// several reports whether the run has more than one endpoint.
func (r *router) several() bool { return len(r.eps) > 1 }

// excusable reports whether a failed attempt may be its endpoint's outage,
// not the prompt's: then the endpoint's gate is asked (a probe), and if
// its server is away the attempt is not charged. With one server, a
// connection failure (refused, reset before any answer), as always. With
// several, also a stream cut and a 5xx: a replica killed mid-answer cuts
// its streams, and a proxy before a dead replica answers 502 or 503, and
// another replica can take the prompt at once. A cut or a 5xx from a
// server that still answers the probe is charged as usual.
func (r *router) excusable(ce *wire.Error) bool {
	if ce.Cause == wire.CauseConnection {
		return true
	}
	return r.several() && (ce.Cause == wire.CauseStreamCut || ce.Status >= 500)
}
