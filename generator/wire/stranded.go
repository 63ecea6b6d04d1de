package wire

// A streamed request that has had no byte yet, not even its headers, may be
// waiting in the server's queue: llama-server sends nothing until a slot
// frees, and a long queue makes that minutes. StallTimeout cannot bound it
// (its watch starts with the headers), and a bound of its own would cut
// requests that wait their turn, sending them to the back of the queue.
// What tells a lost request from a waiting one is its order: servers serve
// their queue first in, first out, so once a request sent after this one
// to the same server has had its headers, this one is no longer waiting its
// turn. A server that was stopped and started again on the same address is
// the case seen: the old process stops listening but holds its queued
// connections open without a byte, while the new one answers every new
// request, and 16 requests sat for endpoint.timeout (30 minutes) with no
// word. So: a stream that was overtaken (a later one to its server had its
// headers) and has still had no byte StallTimeout after that is cut, with
// cause stall and a message that says so, and retried.

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errStranded is the cause with which the watch cancels a stream that was
// overtaken and then waited StallTimeout more for its first byte.
var errStranded = errors.New("no answer while later requests were answered")

// awaiting is one client's streams that have had no headers yet.
type awaiting struct {
	stall  time.Duration
	now    func() time.Time
	onWait func(delta int) // Options.OnAwait; nil: none

	mu       sync.Mutex
	seq      uint64              // streams sent
	answered uint64              // the latest-sent stream that has had its headers
	waiting  map[uint64]*awaiter // by seq
	timer    *time.Timer         // armed while any waits
}

type awaiter struct {
	sent      time.Time
	overtaken time.Time // when a later stream first had its headers; zero: not yet
	cut       context.CancelCauseFunc
	shown     bool // counted by onWait: it has waited awaitShown
}

// awaitShown is how long a stream waits for its headers before onWait
// counts it: every stream waits a moment (the request is on its way), and a
// count of those would only flicker on the progress line.
const awaitShown = time.Second

func newAwaiting(stall time.Duration, onWait func(int)) *awaiting {
	return &awaiting{stall: stall, now: time.Now, onWait: onWait, waiting: map[uint64]*awaiter{}}
}

// interval is how often the watch looks while a stream waits: a quarter of
// the bound, so that a stranded stream is cut between 1 and 1.25 times it
// after it was overtaken, at least every awaitShown so that the count is
// current, and not more often than every 100 ms.
func (a *awaiting) interval() time.Duration {
	return min(max(a.stall/4, 100*time.Millisecond), awaitShown)
}

// sent registers a stream about to be sent, which cut cancels; done,
// called once its headers came or it failed without them, ends the wait.
func (a *awaiting) sent(cut context.CancelCauseFunc) (done func(headers bool)) {
	a.mu.Lock()
	a.seq++
	seq := a.seq
	a.waiting[seq] = &awaiter{sent: a.now(), cut: cut}
	if a.timer == nil {
		a.timer = time.AfterFunc(a.interval(), a.check)
	}
	a.mu.Unlock()
	return func(headers bool) {
		a.mu.Lock()
		w, still := a.waiting[seq] // not if check cut it
		delete(a.waiting, seq)
		if headers && seq > a.answered {
			a.answered = seq
		}
		a.mu.Unlock()
		if still && w.shown && a.onWait != nil {
			a.onWait(-1)
		}
	}
}

// check counts the streams that have waited awaitShown, marks those a
// later one overtook, and cuts those overtaken StallTimeout ago. It rearms
// itself while any stream waits.
func (a *awaiting) check() {
	now := a.now()
	a.mu.Lock()
	var cut []context.CancelCauseFunc
	shown := 0
	for seq, w := range a.waiting {
		if !w.shown && now.Sub(w.sent) >= awaitShown {
			w.shown = true
			shown++
		}
		if seq < a.answered && w.overtaken.IsZero() {
			w.overtaken = now
		}
		if !w.overtaken.IsZero() && now.Sub(w.overtaken) >= a.stall {
			cut = append(cut, w.cut)
			delete(a.waiting, seq)
			if w.shown {
				shown--
			}
		}
	}
	if shown != 0 && a.onWait != nil {
		defer a.onWait(shown)
	}
	if len(a.waiting) > 0 {
		a.timer.Reset(a.interval())
	} else {
		a.timer = nil
	}
	a.mu.Unlock()
	for _, c := range cut {
		c(errStranded)
	}
}
