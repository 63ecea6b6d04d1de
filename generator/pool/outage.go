package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/backoff"
)

// A restarting vLLM refuses connections for minutes (loading a large model
// takes that long). Counted as ordinary retries, 200 slots would use up
// their attempts within a minute and then, slot after slot, mark the whole
// dataset failed while the server is away. So a connection failure first
// asks the outage gate whether the server is there at all: if it is not,
// every slot waits on the gate (one prober, not 200) and the attempts spent
// during the outage are not the prompt's fault. If it is (the failure was
// this request's), the attempt counts as usual.
//
// With several endpoints (router.go) each has its own gate: a slot that
// finds its endpoint away trips that gate (trip) and goes at once to another
// that is up; only when every gate is closed does it wait (router.waitUp).

// prober tells whether the server answers at all; *wireClient is one (its
// Models call is cheap and needs no model).
type prober interface {
	Models(ctx context.Context) ([]string, error)
}

var _ prober = (*wire.Client)(nil)

// outage is one endpoint's gate, shared by every slot of a Run.
type outage struct {
	life       context.Context // the Run's: probing ends with it
	probe      func(ctx context.Context) error
	minBackoff time.Duration
	maxBackoff time.Duration
	now        func() time.Time
	onChange   func(down bool, since time.Time) // may be nil

	down    atomic.Bool // back != nil, read without the lock on every answer
	probing atomic.Bool // the prober's probe is under way (for the state shown)
	// epoch counts the outages begun: a request sent before the current
	// one began may still bring an answer in after it, which proves
	// nothing about now.
	epoch atomic.Int64
	// kick wakes the prober for a probe now (nudge); nil: never.
	kick chan struct{}

	mu        sync.Mutex
	back      chan struct{} // non-nil while the server is down; closed when it is back
	since     time.Time
	why       string             // the last probe's error while down: what the endpoint said, or that it said nothing
	stopWatch context.CancelFunc // ends the prober when an answer came first
}

// check is called by a slot after a connection failure. It reports whether
// the server was down (the caller then does not count the attempt), after
// waiting until it is back; err is ctx's error when the wait was cut.
func (o *outage) check(ctx context.Context) (wasDown bool, err error) {
	back, err := o.trip(ctx)
	if back == nil || err != nil {
		return back != nil, err
	}
	select {
	case <-back:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// trip is check without the wait: after a connection failure it tells
// whether the server is down, closing the gate (and starting its prober)
// when this slot is the first to find out. back is the gate's channel,
// closed when the server is back, or nil when the server answered the
// probe (the failure was the request's). A router with other endpoints
// sends the request elsewhere rather than wait.
func (o *outage) trip(ctx context.Context) (back chan struct{}, err error) {
	o.mu.Lock()
	back = o.back
	if back == nil {
		// Is it only this request? One quick probe, by this slot.
		o.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		perr := o.probe(pctx)
		cancel()
		if perr == nil || ctx.Err() != nil {
			return nil, ctx.Err()
		}
		o.mu.Lock()
		if o.back == nil {
			o.back = make(chan struct{})
			o.since = o.now()
			o.why = perr.Error()
			o.epoch.Add(1)
			o.down.Store(true)
			if o.onChange != nil {
				o.onChange(true, o.since)
			}
			wctx, stop := context.WithCancel(o.life)
			o.stopWatch = stop
			go o.watch(wctx, o.back)
		}
		back = o.back
	}
	o.mu.Unlock()
	return back, nil
}

// Down reports whether the gate is closed; a nil gate never is.
func (o *outage) Down() bool { return o != nil && o.down.Load() }

// Probing reports whether the prober is asking the server right now.
func (o *outage) Probing() bool { return o != nil && o.probing.Load() }

// downSince is when the current outage began (zero while up).
func (o *outage) downSince() time.Time {
	if o == nil {
		return time.Time{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.back == nil {
		return time.Time{}
	}
	return o.since
}

// reason is why the gate is closed: the last probe's error (empty while up).
func (o *outage) reason() string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.back == nil {
		return ""
	}
	return o.why
}

// watch probes with capped exponential backoff until the server answers,
// then opens the gate. It outlives the slot that started it but not the
// Run (o.life); slots waiting on a gate that never opens end with their own
// context, which is the Run's too.
func (o *outage) watch(ctx context.Context, back chan struct{}) {
	// One prober, so no jitter: the waits double from minBackoff to
	// maxBackoff.
	p := backoff.Policy{Initial: o.minBackoff, Max: o.maxBackoff}
	for attempt := 1; ; attempt++ {
		if !o.wait(ctx, p.Ceiling(attempt)) {
			return
		}
		o.probing.Store(true)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := o.probe(pctx)
		cancel()
		o.probing.Store(false)
		if err == nil {
			break
		}
		o.mu.Lock()
		if o.back == back {
			o.why = err.Error()
		}
		o.mu.Unlock()
	}
	o.reopen(back)
}

// wait is the prober's wait of d before its next probe, cut short by a
// nudge; false when ctx ended.
func (o *outage) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-o.kick: // nil: never
	}
	return true
}

// nudge asks the prober of a closed gate to probe now: the server's
// /metrics answered, so it may be back long before the next probe (the
// waits double to 30 s: a restarted server was found 20 s after its
// metrics showed it). Cheap while the gate is open; o may be nil.
func (o *outage) nudge() {
	if o == nil || !o.down.Load() {
		return
	}
	select {
	case o.kick <- struct{}{}:
	default: // one is pending already
	}
}

// sent is taken before a request is sent and handed to answered with its
// outcome. o may be nil (no gate), as for answered.
func (o *outage) sent() int64 {
	if o == nil {
		return 0
	}
	return o.epoch.Load()
}

// answered is called after the server answered a request (a success, or an
// HTTP status below 500) that was sent at epoch: if it was sent during the
// current outage, the server is back, so the outage ends at once rather
// than at the prober's next probe, up to 30 s later, and the slots waiting
// on the gate go on. An answer to a request sent before the outage began
// says nothing (it may have been on its way as the server went). Cheap when
// the server is up: one atomic load. o may be nil (no gate).
func (o *outage) answered(epoch int64) {
	if o == nil || !o.down.Load() {
		return
	}
	o.mu.Lock()
	back := o.back
	current := o.epoch.Load() == epoch
	o.mu.Unlock()
	if back != nil && current {
		o.reopen(back)
	}
}

// reopen ends the outage whose gate is back, once: by the prober or by an
// answer, whichever comes first; the other finds it done.
func (o *outage) reopen(back chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.back != back {
		return
	}
	o.back = nil
	o.down.Store(false)
	o.stopWatch()
	if o.onChange != nil {
		// Under the lock, as the outage's start is: a new outage cannot
		// be reported before this one's end.
		o.onChange(false, o.since)
	}
	close(back)
}
