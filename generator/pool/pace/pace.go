// Package pace paces one endpoint to a hosted server's rate limits. A
// hosted endpoint states its limits of requests and tokens per minute in
// every answer's headers (wire.Limits) and answers 429 past them; a Pacer
// keeps a bucket of each, a minute's worth refilled continuously over the
// minute as the server's are, and a request waits in its slot for its
// share before it is sent, so it goes at the rate the limits allow instead
// of finding them by 429s, and the wait is back-pressure like the
// concurrency limit. The buckets follow what the server says: its stated
// limit, and what remains (a bucket holding more than the server says is
// left is lowered to it). Where the server states nothing, the configured
// limits (endpoint.max_requests_per_minute, max_tokens_per_minute) pace
// with a second's worth of burst. A request's tokens are counted at
// admission, as providers count them: its prompt's estimate (bytes/4,
// corrected by the answers' usage) plus its max_tokens.
//
// Every 429 is pacing too: it holds the endpoint back (at most
// maxPaceHold), uses up none of the prompt's attempts and says nothing of
// the replica's health. The hold is what the server said (retry-after,
// retry-after-ms, or a reset header with nothing left), else a backoff
// that doubles from retry.initial_backoff with each round of 429s since
// the last answer. A server that answers nothing but 429s for outageAfter
// is said to be out, and its requests wait as they do for a server that is
// down.
//
// It is apart from package pool because it is one endpoint's arithmetic,
// with no slots, routing or records: each of the router's endpoints holds
// a Pacer, and the engine reads its Signals for concurrency: auto.
package pace

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/backoff"
)

// Limits are the limits an endpoint is held to where the server states
// none, per replica; 0: none.
type Limits struct {
	RequestsPerMinute int
	TokensPerMinute   int
}

const (
	// maxPaceHold caps the hold a 429 asks: the limits are per minute,
	// so a longer wait is asked again by the next answer if it holds.
	maxPaceHold = time.Minute
	// outageAfter is how long an endpoint may answer nothing but 429s
	// before it is said to be out.
	outageAfter = 10 * time.Minute
)

// UnsaidHold is the backoff after 429s that say nothing of when to come
// back, by their round since the last answer: initial (a second when not
// set), doubling, at most maxBackoff (when set) and maxPaceHold.
func UnsaidHold(initial, maxBackoff time.Duration) backoff.Policy {
	p := backoff.Policy{Initial: initial, Max: maxPaceHold}
	if p.Initial <= 0 {
		p.Initial = time.Second
	}
	if maxBackoff > 0 {
		p.Max = min(p.Max, max(maxBackoff, p.Initial))
	}
	return p
}

// Which limit makes requests wait (Pacer.binds).
const (
	BindRequests = "requests"
	BindTokens   = "tokens"
)

// Pacer is one endpoint's buckets and hold; safe for concurrent use. A nil
// Pacer (an endpoint made by hand in a test) paces nothing.
type Pacer struct {
	now    func() time.Time
	cfg    Limits
	unsaid backoff.Policy // the hold after 429s that say nothing (UnsaidHold)

	mu        sync.Mutex
	req, tok  *rate.Limiter // nil: no limit known
	stated    [2]bool       // the server stated the requests', tokens' limit
	holdUntil time.Time     // a 429 holds every request back until then
	perByte   float64       // prompt tokens per byte, from the answers' usage
	binds     string        // the limit that last made a request wait
	only429   time.Time     // since when every answer was a 429; zero: the last was not
	out       bool          // said to be out (outageAfter of 429s)
	rounds    int           // holds of 429s that said nothing since the last answer
	saidNever bool          // a request was found never to fit the stated tokens a minute

	waiting atomic.Int64 // requests waiting for their share now

	// engaged: the pacer has work, a limit configured or stated, a 429
	// seen, or Signals to count. Until then a request pays no lock here
	// (a job without limits pays nothing for pacing): Cost, NeverFits,
	// Wait, Answered and Limited return at once. Once set it stays.
	engaged atomic.Bool
	signals bool // count Signals (concurrency: auto); else they stay zero

	// What the answers say, for concurrency: auto without /metrics
	// (Signals): requests sent and not ended now, the request-seconds
	// they spent at the server up to lastEvent, the attempts ended and
	// those answered 429, and the mean admission cost.
	atServer  int64
	busy      float64
	lastEvent time.Time
	ended     int64
	said429   int64
	waited    int64 // requests that waited for their share
	meanCost  float64
}

// Signals are what an endpoint's answers said so far (concurrency: auto
// steers by them where the server serves no /metrics) and the limits in
// force: its own stated, else the configured ones.
type Signals struct {
	Ended   int64   // attempts sent that ended, answered or not
	Limited int64   // of them, those answered 429
	Waited  int64   // requests that waited for their share of the limits
	Busy    float64 // request-seconds at the server: ΔBusy/ΔEnded is the mean latency (Little's law)
	// RequestsPerMinute and TokensPerMinute are the limits in force (0:
	// none known); Cost is a request's mean tokens as counted at admission.
	RequestsPerMinute, TokensPerMinute, Cost float64
}

func (p *Pacer) Signals() Signals {
	if p == nil {
		return Signals{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.tick(now)
	s := Signals{Ended: p.ended, Limited: p.said429, Waited: p.waited, Busy: p.busy, Cost: p.meanCost}
	if p.req != nil {
		s.RequestsPerMinute = float64(p.req.Limit()) * 60
	}
	if p.tok != nil {
		s.TokensPerMinute = float64(p.tok.Limit()) * 60
	}
	return s
}

// tick adds the request-seconds at the server up to now. Called with mu.
func (p *Pacer) tick(now time.Time) {
	if !p.lastEvent.IsZero() {
		p.busy += float64(p.atServer) * max(now.Sub(p.lastEvent).Seconds(), 0)
	}
	p.lastEvent = now
}

// New is an endpoint's pacer under the configured limits cfg, holding
// back after unsaid 429s by unsaid (UnsaidHold), on the clock now;
// signals: count what Signals reports (concurrency: auto reads them).
func New(cfg Limits, unsaid backoff.Policy, now func() time.Time, signals bool) *Pacer {
	p := &Pacer{now: now, cfg: cfg, unsaid: unsaid, perByte: defaultPerByte, signals: signals}
	p.engaged.Store(signals || cfg.RequestsPerMinute > 0 || cfg.TokensPerMinute > 0)
	if n := cfg.RequestsPerMinute; n > 0 {
		p.req = rate.NewLimiter(rate.Limit(float64(n)/60), max(1, n/60))
	}
	if n := cfg.TokensPerMinute; n > 0 {
		p.tok = rate.NewLimiter(rate.Limit(float64(n)/60), max(1, n/60))
	}
	return p
}

// defaultPerByte is a prompt's tokens a byte until answers say.
const defaultPerByte = 0.25

// Cost is a request's tokens as a provider counts them at admission: its
// prompt's estimate plus its max_tokens; bytes is the prompt's size, which
// Answered takes back with the prompt's tokens its usage says.
func (p *Pacer) Cost(req wire.Request) (bytes, total int) {
	if p == nil {
		return 0, 0
	}
	for _, m := range req.Messages {
		bytes += len(m.Content) + len(m.Role)
	}
	if !p.engaged.Load() { // perByte is learnt once engaged
		return bytes, int(float64(bytes)*defaultPerByte) + 1 + max(req.MaxTokens, 0)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	total = int(float64(bytes)*p.perByte) + 1 + max(req.MaxTokens, 0)
	if p.meanCost == 0 {
		p.meanCost = float64(total)
	}
	p.meanCost += 0.05 * (float64(total) - p.meanCost)
	return bytes, total
}

// Wait returns when a request of tokens may be sent, then counted at the
// server until limited takes its end, or with ctx's error.
func (p *Pacer) Wait(ctx context.Context, tokens int) error {
	if p == nil {
		return nil
	}
	if !p.engaged.Load() {
		return ctx.Err()
	}
	if err := p.share(ctx, tokens); err != nil {
		return err
	}
	p.mu.Lock()
	p.tick(p.now())
	p.atServer++
	p.mu.Unlock()
	return nil
}

// share returns when a request of tokens has its share of the limits.
func (p *Pacer) share(ctx context.Context, tokens int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	now := p.now()
	var delay time.Duration
	var rs []*rate.Reservation
	bind := ""
	for i, b := range []*rate.Limiter{p.req, p.tok} {
		if b == nil {
			continue
		}
		n := 1
		if i == 1 {
			n = min(tokens, b.Burst())
		}
		r := b.ReserveN(now, n)
		rs = append(rs, r)
		if d := r.DelayFrom(now); d > delay {
			delay, bind = d, []string{BindRequests, BindTokens}[i]
		}
	}
	if d := p.holdUntil.Sub(now); d > delay {
		delay, bind = d, p.holdBinds()
	}
	if delay > 0 {
		p.binds = bind
		p.waited++
	}
	p.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		at := p.now()
		for _, r := range rs {
			r.CancelAt(at) // not sent: its share goes back
		}
		return ctx.Err()
	}
	// A 429 may have held the endpoint back while this waited.
	for {
		p.mu.Lock()
		d := p.holdUntil.Sub(p.now())
		p.mu.Unlock()
		if d <= 0 {
			return nil
		}
		t.Reset(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			at := p.now()
			for _, r := range rs {
				r.CancelAt(at)
			}
			return ctx.Err()
		}
	}
}

// holdBinds is the limit a hold is for: the one the bucket says is spent.
func (p *Pacer) holdBinds() string {
	if p.tok != nil && p.tok.TokensAt(p.now()) < 1 && (p.req == nil || p.req.TokensAt(p.now()) >= 1) {
		return BindTokens
	}
	return BindRequests
}

// Answered takes what an answer said: its stated limits, and, when
// usage came, how many tokens its prompt of bytes was.
func (p *Pacer) Answered(l wire.Limits, bytes, promptTokens int) {
	if p == nil {
		return
	}
	if !p.engaged.Load() {
		if !l.Requests.Known && !l.Tokens.Known {
			return
		}
		p.engaged.Store(true) // the server states its limits: paced from now
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.only429, p.out, p.rounds = time.Time{}, false, 0
	p.follow(l, now)
	if promptTokens > 0 && bytes > 0 {
		// An exponential average of the tokens a byte makes: what the
		// server counts, whatever its tokenizer.
		p.perByte += 0.1 * (min(float64(promptTokens)/float64(bytes), 4) - p.perByte)
	}
}

// follow makes the buckets the server's: its stated limit per minute, a
// minute's worth of burst, and no more left than it says. Called with mu.
func (p *Pacer) follow(l wire.Limits, now time.Time) {
	for i, s := range []wire.Limit{l.Requests, l.Tokens} {
		if !s.Known {
			continue
		}
		b := &p.req
		if i == 1 {
			b = &p.tok
		}
		perSec := rate.Limit(float64(s.Limit) / 60)
		burst := int(min(s.Limit, 1<<30))
		switch {
		case *b == nil || !p.stated[i]:
			*b = rate.NewLimiter(perSec, burst) // full: the Remaining below lowers it
			p.stated[i] = true
		case (*b).Burst() != burst:
			(*b).SetLimitAt(now, perSec)
			(*b).SetBurstAt(now, burst)
		}
		if have := (*b).TokensAt(now); float64(s.Remaining) < have {
			(*b).ReserveN(now, int(have-float64(s.Remaining)))
		}
	}
}

// Limited takes the end of every attempt wait let go (e nil: answered),
// and reports whether it is a 429, which is always pacing: the endpoint is
// held back until the server said, or by its own backoff, at most maxPaceHold,
// and the hold is returned. said is a line to log when the
// endpoint has answered nothing but 429s for outageAfter, once.
func (p *Pacer) Limited(e *wire.Error) (hold time.Duration, ok bool, said string) {
	if p == nil {
		return 0, false, ""
	}
	limited := e != nil && e.Status == 429
	if !p.engaged.Load() {
		if !limited {
			return 0, false, ""
		}
		p.engaged.Store(true) // the first 429: paced from now
	}
	p.mu.Lock()
	p.tick(p.now())
	p.atServer = max(p.atServer-1, 0)
	p.ended++
	if limited {
		p.said429++
	}
	p.mu.Unlock()
	if !limited {
		return 0, false, ""
	}
	hold = e.RetryAfter
	if hold == 0 {
		for _, s := range []wire.Limit{e.Limits.Requests, e.Limits.Tokens} {
			if s.Known && s.Remaining == 0 {
				// The bucket empty and no retry-after: a few
				// requests' shares back (the reset is until it is
				// full, far longer than the next one needs).
				hold = max(hold, min(s.Reset, 4*time.Minute/time.Duration(max(s.Limit, 1))))
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if hold <= 0 {
		// Said nothing of when to come back: a backoff of its own, a
		// round longer each time a 429 ends after the last hold did
		// (the requests in flight during a hold are one round, not
		// one each).
		if !now.Before(p.holdUntil) || p.rounds == 0 {
			p.rounds++
		}
		hold = p.unsaid.Ceiling(p.rounds)
	}
	hold = min(hold, maxPaceHold)
	p.follow(e.Limits, now)
	if until := now.Add(hold); until.After(p.holdUntil) {
		p.holdUntil = until
	}
	if p.only429.IsZero() {
		p.only429 = now
	}
	if !p.out && now.Sub(p.only429) >= outageAfter {
		p.out = true
		said = fmt.Sprintf("answered nothing but 429 (rate limited) for %v: out, as a server that is down; its requests wait, none fails for it", now.Sub(p.only429).Round(time.Second))
	}
	return hold, true, said
}

// NeverFits reports whether a request of tokens (its prompt's estimate
// plus its max_tokens, as cost counts it) exceeds the tokens a minute the
// server stated: no wait lets it in, and each 429 would only be paced.
// first is set on the first request found never to fit, so that the run's
// log says it once.
func (p *Pacer) NeverFits(tokens int) (limit int, never, first bool) {
	if p == nil || !p.engaged.Load() { // no limit stated
		return 0, false, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stated[1] || p.tok == nil {
		return 0, false, false
	}
	limit = p.tok.Burst()
	if tokens <= limit {
		return limit, false, false
	}
	first, p.saidNever = !p.saidNever, true
	return limit, true, first
}

// OutSince is when an endpoint said to be out began answering only 429s.
func (p *Pacer) OutSince() (time.Time, bool) {
	if p == nil {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.only429, p.out
}

// Allows is the pace the limits in force allow, for the ETA: requests a
// second (the requests' limit, or the tokens' over the mean admission
// cost, whichever is less) and the requests the buckets would admit now
// without waiting (negative: owed to requests already waiting). 0, 0
// with no limit known.
func (p *Pacer) Allows() (perSec, ready float64) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.req != nil {
		perSec, ready = float64(p.req.Limit()), p.req.TokensAt(now)
	}
	if p.tok != nil && p.meanCost > 0 {
		r, n := float64(p.tok.Limit())/p.meanCost, p.tok.TokensAt(now)/p.meanCost
		if perSec == 0 || r < perSec {
			perSec = r
		}
		if p.req == nil || n < ready {
			ready = n
		}
	}
	return perSec, ready
}

// State is what the figures show: the requests waiting now and the limit
// that binds.
func (p *Pacer) State() (waiting int64, binds string) {
	if p == nil {
		return 0, ""
	}
	p.mu.Lock()
	binds = p.binds
	p.mu.Unlock()
	return p.waiting.Load(), binds
}
