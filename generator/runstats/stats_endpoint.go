package runstats

// Per-endpoint figures: with several replicas (endpoint.base_url a list),
// each has its own requests in flight, rates and state next to the run's
// totals in Stats.

import (
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint states, as status.json, report.json and --metrics-addr show them.
const (
	EndpointUp      = "up"      // its gate is open: requests go to it
	EndpointDown    = "down"    // its gate is closed, or it is taken out for failing: no request goes to it but a probe
	EndpointProbing = "probing" // down, and a probe (its model list, or a trial request) is asking it right now
)

// Endpoint is one endpoint's ledger: live state read by the router
// (in flight, its cap, its gate) and per-second buckets of answered
// requests and their tokens. Its tokens are credited when an answer
// completes (usage, else the streamed chunks), not per streamed delta as
// the run's totals are: the per-endpoint tok/s is a finer split of the same
// work, and a window of 10 s or more smooths the difference. Apart from
// them, streamed counts every delta it streamed as it arrives, retried
// attempts' too (the server did that work): concurrency: auto's measure of
// the endpoint's throughput, exact from one reading to the next.
type Endpoint struct {
	url string // passwords masked

	inflight atomic.Int64 // requests sent to it and not yet ended
	streamed atomic.Int64 // deltas it streamed, every attempt's, as they arrived
	// limit is this endpoint's own cap of requests in flight (set by
	// whatever sizes each replica, e.g. concurrency: auto); 0: none, the
	// pool's concurrency alone bounds it. The router prefers the endpoint
	// with the most headroom under it; it is a preference, not a bound:
	// with every endpoint at its cap the pool's concurrency is what holds
	// the next request back, so the caps should add up to it.
	limit atomic.Int64
	gate  atomic.Pointer[gateRef] // the Run's gate for it; nil before Run or when it cannot be probed
	// placedPrompt and placedHeld are the prompt tokens of the answers
	// placed by prefix (with several endpoints) and the client's estimate
	// of those it had sent there before (AddPlaced).
	placedPrompt, placedHeld atomic.Int64

	mu        sync.Mutex
	requests  int64 // attempts it answered (a completion, or any HTTP status below 500)
	failures  int64 // attempts that failed on it (any cause)
	tokens    int64 // completion tokens of the answers it completed
	completed int64 // answers it completed
	buckets   [ringSize]epBucket
}

// Gate is what decides whether requests go to an endpoint, as its figures
// need it: its state now.
type Gate interface {
	State() GateState
}

// GateState is an endpoint's state: down (no request goes to it but a
// probe), probing (a probe is asking it right now), since when, and why.
type GateState struct {
	Down    bool
	Probing bool
	Since   time.Time // when it went down; zero while up
	Reason  string    // why it is down: what its probe or its recent answers said
	// Paced are the requests waiting now for their share of the
	// endpoint's rate limits, PacedBy the limit that makes them wait
	// (requests or tokens).
	Paced   int64
	PacedBy string
	// PacePerSec is the requests a second its rate limits allow (0: no
	// limit known), PaceReady those they would admit now without waiting
	// (negative: owed to the requests waiting): the ETA's floor.
	PacePerSec, PaceReady float64
}

type gateRef struct{ g Gate }

// SetGate is the Run's gate for the endpoint, whose state snapshots show.
func (es *Endpoint) SetGate(g Gate) { es.gate.Store(&gateRef{g}) }

// Down reports whether the endpoint is down (no gate: never).
func (es *Endpoint) Down() bool {
	ref := es.gate.Load()
	return ref != nil && ref.g.State().Down
}

// AddInFlight counts a request sent to the endpoint (+1) or ended (-1).
func (es *Endpoint) AddInFlight(d int64) { es.inflight.Add(d) }

// InFlight is the number of requests in flight to the endpoint.
func (es *Endpoint) InFlight() int64 { return es.inflight.Load() }

// Limit is the endpoint's own cap of requests in flight; 0: none.
func (es *Endpoint) Limit() int64 { return es.limit.Load() }

// Streamed is the number of deltas the endpoint streamed so far, every
// attempt's (see Tracker.SendingTo).
func (es *Endpoint) Streamed() int64 { return es.streamed.Load() }

type epBucket struct {
	sec    int64 // -1: never used
	reqs   int64
	tokens int64
}

func newEndpoint(url string) *Endpoint {
	es := &Endpoint{url: url}
	for i := range es.buckets {
		es.buckets[i].sec = -1
	}
	return es
}

// SetEndpoints names the run's endpoints (passwords masked by the caller)
// so that every snapshot lists them, before the first request too. The
// engine's router takes these ledgers; with no call it makes unnamed ones.
func (s *Stats) SetEndpoints(urls []string) {
	eps := make([]*Endpoint, len(urls))
	for i, u := range urls {
		eps[i] = newEndpoint(u)
	}
	s.mu.Lock()
	s.endpoints = eps
	s.mu.Unlock()
}

// EndpointLedgers returns n ledgers: the ones SetEndpoints made when there
// are n of them, else n new unnamed ones, which every snapshot then lists.
func (s *Stats) EndpointLedgers(n int) []*Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.endpoints) == n {
		return s.endpoints
	}
	s.endpoints = make([]*Endpoint, n)
	for i := range s.endpoints {
		s.endpoints[i] = newEndpoint("")
	}
	return s.endpoints
}

// ended records one attempt sent to the endpoint: answered (the server was
// there), and when it completed an answer, its tokens; origin is the run's
// time origin (Tracker.start), now the attempt's end.
func (es *Endpoint) Ended(origin, now time.Time, answered, completed bool, tokens int64) {
	sec := max(int64(now.Sub(origin)/time.Second), 0)
	es.mu.Lock()
	defer es.mu.Unlock()
	if !answered || !completed {
		es.failures++
	}
	if answered {
		es.requests++
	}
	if !completed {
		return
	}
	es.completed++
	es.tokens += tokens
	b := &es.buckets[sec&ringMask]
	if b.sec != sec {
		*b = epBucket{sec: sec}
	}
	b.reqs++
	b.tokens += tokens
}

// AddPlaced counts an answer of prompt tokens placed here by prefix, held
// of them the client's estimate of those its leading messages, sent here
// before, cover: the prefill the client expects the server's prefix cache
// to save.
func (es *Endpoint) AddPlaced(prompt, held int64) {
	es.placedPrompt.Add(prompt)
	es.placedHeld.Add(held)
}

// EndpointSnapshot is one endpoint's figures at one moment.
type EndpointSnapshot struct {
	URL       string    // passwords masked; "" when the run did not name it
	State     string    // EndpointUp, EndpointDown or EndpointProbing
	DownSince time.Time // zero while up
	Reason    string    // while down: why
	InFlight  int64     // requests sent to it and not yet ended
	Limit     int64     // its own cap of requests in flight; 0: none
	Requests  int64     // attempts it answered (an answer, or an HTTP status below 500)
	Failures  int64     // attempts that failed on it, any cause (an outage's included)
	Completed int64     // answers it completed (each key's answer, and every turn's)
	// CompletionTokens of the answers it completed.
	CompletionTokens int64
	// StreamedTokens are the deltas it streamed, as they arrived, every
	// attempt's (Endpoint.Streamed).
	StreamedTokens int64
	// Paced are its requests waiting for their share of its rate limits
	// now, PacedBy the limit that binds (GateState).
	Paced   int64
	PacedBy string
	// PacePerSec and PaceReady are its pace (GateState): what its rate
	// limits allow.
	PacePerSec, PaceReady float64
	// PlacedPrompt and PlacedHeld are the prompt tokens of the answers
	// placed by prefix and the client's estimate of those a prefix sent
	// there before covers (Endpoint.AddPlaced).
	PlacedPrompt, PlacedHeld int64
	// Cumulative rates over the run's Elapsed, and the recent windows as
	// the run's (Snapshot.Last10s, Last60s); tokens at completion.
	ReqPerSec, TokPerSec float64
	Last10s, Last60s     Throughput
}

// snapshot reads the endpoint at elapsed (the run's Elapsed).
func (es *Endpoint) snapshot(elapsed time.Duration) EndpointSnapshot {
	var gs GateState
	if ref := es.gate.Load(); ref != nil {
		gs = ref.g.State()
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	out := EndpointSnapshot{
		URL:              es.url,
		State:            EndpointUp,
		DownSince:        gs.Since,
		Reason:           gs.Reason,
		InFlight:         es.inflight.Load(),
		Limit:            es.limit.Load(),
		Requests:         es.requests,
		Failures:         es.failures,
		Completed:        es.completed,
		CompletionTokens: es.tokens,
		StreamedTokens:   es.streamed.Load(),
		Paced:            gs.Paced,
		PacedBy:          gs.PacedBy,
		PacePerSec:       gs.PacePerSec,
		PaceReady:        gs.PaceReady,
		PlacedPrompt:     es.placedPrompt.Load(),
		PlacedHeld:       es.placedHeld.Load(),
	}
	switch {
	case gs.Down && gs.Probing:
		out.State = EndpointProbing
	case gs.Down:
		out.State = EndpointDown
	}
	if secs := elapsed.Seconds(); secs > 0 {
		out.ReqPerSec = float64(es.completed) / secs
		out.TokPerSec = float64(es.tokens) / secs
	}
	out.Last10s = es.windowLocked(out, elapsed, shortWindow)
	out.Last60s = es.windowLocked(out, elapsed, longWindow)
	return out
}

// windowLocked sums the last w whole seconds as Stats.windowLocked does:
// the cumulative rates while the run is shorter than w.
func (es *Endpoint) windowLocked(cum EndpointSnapshot, elapsed, w time.Duration) Throughput {
	if elapsed < w {
		return Throughput{Span: elapsed, ReqPerSec: cum.ReqPerSec, TokPerSec: cum.TokPerSec}
	}
	cur := int64(elapsed / time.Second)
	var reqs, tok int64
	for sec := cur - int64(w/time.Second); sec < cur; sec++ {
		if b := &es.buckets[sec&ringMask]; b.sec == sec {
			reqs += b.reqs
			tok += b.tokens
		}
	}
	return Throughput{Span: w, ReqPerSec: float64(reqs) / w.Seconds(), TokPerSec: float64(tok) / w.Seconds()}
}

// SetEndpointLimit sets endpoint i's own cap of requests in flight (0:
// none), which the router prefers headroom under; concurrency: auto sets it
// per endpoint. An i out of range is ignored.
func (s *Stats) SetEndpointLimit(i, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= 0 && i < len(s.endpoints) {
		s.endpoints[i].limit.Store(int64(n))
	}
}
