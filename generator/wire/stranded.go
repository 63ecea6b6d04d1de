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

// Among replicas (Options.Replicas) a stream is also lost when its own
// server has sent nothing at all, no headers to any request and no byte on
// any stream, for StallTimeout since it was sent, while another replica
// has: a replica that accepts connections and never answers (a black hole,
// a hung process whose listener lives) would else hold its requests for
// endpoint.timeout, shown up with no failure. Cut with cause stall, it is
// the replica's failure, and the pool sends the request to another one.
// A busy server is not silent: its running streams send bytes, and its
// queue moves (an earlier request has its headers). Another replica that
// holds nothing (no request waiting, no stream being read) and has answered
// before would take the request at once, so it counts as answering (one
// never heard from, after silentAlone stall timeouts): else one request in flight,
// or a job's last rows, on a silent replica beside an idle sound one would
// wait endpoint.timeout, since the sound one has nothing to say.

// A plain request has no byte before its whole answer, and a server answers
// plain requests out of order (the short ones first), so being overtaken
// says nothing of it alone. What does is the server's own count: once a
// later request to it was answered, a scrape of its /metrics (ObserveLoad)
// that shows nothing running and nothing waiting says it does not hold
// this one (a server restarted on its port while the old process keeps the
// accepted connections open): the request is cut at once, plain or
// streamed, instead of after endpoint.timeout (or a stream's StallTimeout).

// errStranded is the cause with which the watch cancels a stream that was
// overtaken and then waited StallTimeout more for its first byte.
var errStranded = errors.New("no answer while later requests were answered")

// errIdle is the cause with which the watch cancels a request that was
// overtaken while its server then showed nothing running or waiting.
var errIdle = errors.New("no answer while later requests were answered and the server shows none running or waiting")

// silentAlone is how many stall timeouts a stream waits with no byte
// before an idle replica that has never answered counts as one that could
// take it: the first requests of a run have no answer to go by, and a
// replica that was never heard from may be as silent as this one.
const silentAlone = 3

// errSilent is the cause with which the watch cancels a stream whose
// server said nothing for StallTimeout while another replica answered.
var errSilent = errors.New("no answer while other replicas answered or stood idle")

// awaiting is one client's streams that have had no headers yet.
type awaiting struct {
	stall  time.Duration
	now    func() time.Time
	onWait func(delta int) // Options.OnAwait; nil: none

	mu       sync.Mutex
	seq      uint64 // streams sent
	answered uint64 // the latest-sent stream that has had its headers
	// answeredAt is when answered last moved: a request it overtook was
	// overtaken by then at the latest.
	answeredAt time.Time
	waiting    map[uint64]*awaiter // by seq
	timer      *time.Timer         // armed while any waits

	peers  *Replicas // the other replicas' clients; nil: none
	idleAt time.Time // the latest scrape that showed nothing running or waiting (ObserveLoad)
	// idleGrace is how long a request must have been sent before an idle
	// scrape says its server lost it (idleGrace; tests shorten it).
	idleGrace time.Duration
	sign      time.Time              // the server's latest headers, or the last byte of a stream that ended
	reading   map[*idleBody]struct{} // streams being read: their bytes are signs too
}

type awaiter struct {
	owner     *awaiting
	seq       uint64
	sent      time.Time
	overtaken time.Time // when a later stream first had its headers; zero: not yet
	cut       context.CancelCauseFunc
	shown     bool // counted by onWait: it has waited awaitShown
	plain     bool // a plain request: its headers come with its whole answer
}

// idleGrace is how long a request waits, sent, before a scrape showing
// its server idle says the server does not hold it. A server counts a
// request only once it has read and queued it: one just sent to an idle
// server is uncounted for a moment, and a later, shorter one may be
// answered meanwhile (seen on a loaded machine: a sound request cut and
// sent again). A server that lost its queue to a restart stays idle far
// longer than this.
const idleGrace = 5 * time.Second

// awaitShown is how long a stream waits for its headers before onWait
// counts it: every stream waits a moment (the request is on its way), and a
// count of those would only flicker on the progress line.
const awaitShown = time.Second

func newAwaiting(stall time.Duration, onWait func(int), peers *Replicas) *awaiting {
	a := &awaiting{stall: stall, now: time.Now, onWait: onWait, waiting: map[uint64]*awaiter{}, peers: peers, reading: map[*idleBody]struct{}{}, idleGrace: idleGrace}
	if peers != nil {
		peers.mu.Lock()
		peers.members = append(peers.members, a)
		peers.mu.Unlock()
	}
	return a
}

// interval is how often the watch looks while a stream waits: a quarter of
// the bound, so that a stranded stream is cut between 1 and 1.25 times it
// after it was overtaken, at least every awaitShown so that the count is
// current, and not more often than every 100 ms.
func (a *awaiting) interval() time.Duration {
	return min(max(a.stall/4, 100*time.Millisecond), awaitShown)
}

// sent registers a request about to be sent, which cut cancels; its
// done, called once its headers came or it failed without them, ends the
// wait. plain marks a request that is not streamed: its headers come with
// its whole answer, so only the idle rule cuts it.
func (a *awaiting) sent(cut context.CancelCauseFunc, plain bool) *awaiter {
	a.mu.Lock()
	a.seq++
	w := &awaiter{owner: a, seq: a.seq, sent: a.now(), cut: cut, plain: plain}
	a.waiting[w.seq] = w
	if a.timer == nil {
		a.timer = time.AfterFunc(a.interval(), a.check)
	}
	a.mu.Unlock()
	return w
}

// done ends w's wait (a method, not a closure: every request, plain ones
// too, registers, and a closure was an allocation each).
func (w *awaiter) done(headers bool) {
	a := w.owner
	a.mu.Lock()
	_, still := a.waiting[w.seq] // not if check cut it
	delete(a.waiting, w.seq)
	if headers {
		a.sign = a.now()
		if w.seq > a.answered {
			a.answered, a.answeredAt = w.seq, a.sign
		}
	}
	a.mu.Unlock()
	if still && w.shown && a.onWait != nil {
		a.onWait(-1)
	}
}

// check counts the streams that have waited awaitShown, marks those a
// later one overtook, and cuts those overtaken StallTimeout ago, and, among
// replicas, those sent StallTimeout ago to a server silent since while
// another replica answered. It rearms itself while any stream waits.
func (a *awaiting) check() {
	now := a.now()
	a.mu.Lock()
	var cut []context.CancelCauseFunc
	var silent []uint64 // waited StallTimeout: is their server silent?
	shown := 0
	var idle []context.CancelCauseFunc
	for seq, w := range a.waiting {
		if !w.plain && !w.shown && now.Sub(w.sent) >= awaitShown {
			w.shown = true
			shown++
		}
		if seq < a.answered && w.overtaken.IsZero() {
			w.overtaken = a.answeredAt
		}
		lost := !w.overtaken.IsZero() && a.idleAt.After(w.overtaken) && a.idleAt.Sub(w.sent) >= a.idleGrace
		if lost || !w.plain && !w.overtaken.IsZero() && now.Sub(w.overtaken) >= a.stall {
			if lost {
				idle = append(idle, w.cut)
			} else {
				cut = append(cut, w.cut)
			}
			delete(a.waiting, seq)
			if w.shown {
				shown--
			}
			continue
		}
		if !w.plain && a.peers != nil && now.Sub(w.sent) >= a.stall {
			silent = append(silent, seq)
		}
	}
	a.mu.Unlock()
	// The peers are asked with no lock held: each takes its own.
	for _, seq := range silent {
		a.mu.Lock()
		w, still := a.waiting[seq]
		a.mu.Unlock()
		if !still || a.signSince(w.sent) || !a.peers.couldAnswer(a, w.sent, now.Sub(w.sent) >= silentAlone*a.stall) {
			continue
		}
		a.mu.Lock()
		if _, still := a.waiting[seq]; still {
			delete(a.waiting, seq)
			if w.shown {
				shown--
			}
			cut = append(cut, func(error) { w.cut(errSilent) })
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	if len(a.waiting) > 0 {
		a.timer.Reset(a.interval())
	} else {
		a.timer = nil
	}
	a.mu.Unlock()
	if shown != 0 && a.onWait != nil {
		a.onWait(shown)
	}
	for _, c := range cut {
		c(errStranded)
	}
	for _, c := range idle {
		c(errIdle)
	}
}

// load is a scrape of the server's /metrics taken at at: with nothing
// running and nothing waiting, the requests overtaken before it are lost.
func (a *awaiting) load(at time.Time, running, waiting float64) {
	if running != 0 || waiting != 0 {
		return
	}
	a.mu.Lock()
	if at.After(a.idleAt) {
		a.idleAt = at
	}
	a.mu.Unlock()
}

// signSince reports whether the server said anything after t: headers to
// any request, or a byte on any stream.
func (a *awaiting) signSince(t time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sign.After(t) {
		return true
	}
	for b := range a.reading {
		if b.lastByte().After(t) {
			return true
		}
	}
	return false
}

// idle reports whether the server holds none of this client's requests
// (none waits for its headers, no stream is being read) and has answered
// before; unproven, whether or not it has.
func (a *awaiting) idle(unproven bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting) == 0 && len(a.reading) == 0 && (unproven || !a.sign.IsZero())
}

// reads registers a stream's body being read, whose bytes show that its
// server is alive; the func returned, called once the body is done with,
// ends that.
func (a *awaiting) reads(b *idleBody) (done func()) {
	a.mu.Lock()
	a.reading[b] = struct{}{}
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.reading, b)
		if last := b.lastByte(); last.After(a.sign) {
			a.sign = last
		}
		a.mu.Unlock()
	}
}

// Replicas groups the clients of one model's replicas (Options.Replicas):
// a stream without headers StallTimeout after it was sent, to a server
// that has said nothing since while another of the group has, is cut as
// that server's loss (cause stall), and the caller sends it elsewhere.
type Replicas struct {
	mu      sync.Mutex
	members []*awaiting
}

// NewReplicas returns an empty group; each New with it joins.
func NewReplicas() *Replicas { return &Replicas{} }

// couldAnswer reports whether a member other than self said anything
// after t, or holds nothing now and so would take a request at once: one
// that has answered before, or, when long is set (the request waited
// silentAlone stall timeouts), any.
func (r *Replicas) couldAnswer(self *awaiting, t time.Time, long bool) bool {
	r.mu.Lock()
	members := r.members
	r.mu.Unlock()
	for _, m := range members {
		if m != self && (m.signSince(t) || m.idle(long)) {
			return true
		}
	}
	return false
}
