package mockserver

// The batch model: what makes a vLLM server's throughput curve have a knee.
// With Options.KVBudget or Options.BatchScale set, requests are scheduled
// here instead of by the plain FIFO slot limit:
//
//   - at most MaxRunning decode at once (0: no count limit); the rest wait
//     in a FIFO queue (vllm:num_requests_waiting);
//   - every running request holds KV cache: its prompt tokens plus the
//     tokens generated so far. A request is admitted only while its prompt
//     fits in what is left of KVBudget; when the running requests grow past
//     the budget, the newest running one is preempted, as vLLM's recompute
//     preemption does: it goes back to the front of the queue, its cache is
//     freed, and once readmitted it generates its tokens again (without
//     sending them twice) before it goes on: the work it had done is lost
//     (vllm:num_preemptions_total, mock_recomputed_tokens_total);
//   - every token takes TokenDelay * (1 + running/BatchScale): a bigger
//     batch makes each step slower, so the total rate running/step rises
//     and flattens.
//
// Below the knee (running * (prompt + answer) within the budget) nothing is
// preempted and throughput rises with concurrency; above it requests queue,
// are preempted and redo their work, so throughput stops rising and falls.

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// batch schedules requests when the batch model is on. Its lock guards the
// queues and the cache; the server's running and waiting gauges mirror them.
type batch struct {
	s          *Server
	maxRunning int // 0: no count limit
	budget     int // KV tokens; 0: no budget

	mu      sync.Mutex
	running []*seq // in admission order: the last is the newest
	waiting []*seq // FIFO; a preempted request goes to the front
	used    int    // KV tokens held by the running requests

	preemptions atomic.Int64
	recomputed  atomic.Int64 // tokens generated again after a preemption
}

// seq is one request's place in the batch.
type seq struct {
	prompt    int
	kv        int           // prompt + tokens generated since it was last admitted
	admitted  chan struct{} // a wake-up after an admission (at most one pending)
	running   bool
	preempted bool // preempted since the owner last waited: its work is lost, even if readmitted since
}

func newBatch(s *Server) *batch {
	return &batch{s: s, maxRunning: s.opts.MaxRunning, budget: s.opts.KVBudget}
}

// acquire queues q and waits until it runs. It fails only when done ends
// first, and then q holds nothing.
func (b *batch) acquire(q *seq, done <-chan struct{}) bool {
	q.admitted = make(chan struct{}, 1)
	b.mu.Lock()
	b.waiting = append(b.waiting, q)
	b.admit()
	b.mu.Unlock()
	return b.wait(q, done)
}

// wait waits until q runs; when done ends first, or the server is
// abandoned (no request runs anew), q leaves the batch.
func (b *batch) wait(q *seq, done <-chan struct{}) bool {
	for {
		b.mu.Lock()
		if q.running {
			q.preempted = false // the owner redoes its work from here
			b.mu.Unlock()
			return true
		}
		b.mu.Unlock()
		select {
		case <-q.admitted: // look again: it may have been preempted since
		case <-done:
			b.leave(q)
			return false
		case <-b.s.conns.abandon:
			b.mu.Lock()
			running := q.running // admitted before Abandon
			b.mu.Unlock()
			if running {
				continue
			}
			b.leave(q)
			return false
		}
	}
}

// leave takes q out of the batch, running or waiting, and admits who fits.
func (b *batch) leave(q *seq) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.running, q); i >= 0 {
		b.running = slices.Delete(b.running, i, i+1)
		b.used -= q.kv
	} else if i := slices.Index(b.waiting, q); i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
	}
	q.running = false
	b.admit()
}

// admit moves requests from the head of the queue into the batch while
// the count limit and the KV budget let them in (a request alone in the
// batch is always let in: it has nobody to wait for); once the server is
// abandoned, nobody is. b.mu is held.
func (b *batch) admit() {
	for len(b.waiting) > 0 && !b.s.abandoned() {
		q := b.waiting[0]
		if b.maxRunning > 0 && len(b.running) >= b.maxRunning {
			break
		}
		if b.budget > 0 && len(b.running) > 0 && b.used+q.prompt > b.budget {
			break
		}
		b.waiting = b.waiting[1:]
		q.kv, q.running = q.prompt, true
		b.running = append(b.running, q)
		b.used += q.kv
		select {
		case q.admitted <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	b.gauges()
}

// gauges publishes the batch's counts to the server's gauges. b.mu is held.
func (b *batch) gauges() {
	n := int64(len(b.running))
	b.s.running.Store(n)
	b.s.waiting.Store(int64(len(b.waiting)))
	for {
		p := b.s.peak.Load()
		if n <= p || b.s.peak.CompareAndSwap(p, n) {
			break
		}
	}
}

// grow adds one generated token to q's cache, preempting the newest
// running requests while the batch is over budget. It reports false when q
// itself was preempted, now or earlier: the owner must wait to be
// readmitted and redo its work (see generation.readmit).
func (b *batch) grow(q *seq) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !q.running || q.preempted {
		return false
	}
	q.kv++
	b.used++
	for b.budget > 0 && b.used > b.budget && len(b.running) > 1 {
		v := b.running[len(b.running)-1]
		b.running = b.running[:len(b.running)-1]
		b.used -= v.kv
		v.running, v.preempted = false, true
		b.waiting = slices.Insert(b.waiting, 0, v)
		b.preemptions.Add(1)
	}
	b.gauges()
	return q.running && !q.preempted
}

// step is the time one token takes in a batch of the current size.
func (b *batch) step() time.Duration {
	d := b.s.opts.TokenDelay
	if k := b.s.opts.BatchScale; k > 0 {
		d += d * time.Duration(b.s.running.Load()) / time.Duration(k)
	}
	return d
}

// kvUsage is the share of the budget in use.
func (b *batch) kvUsage() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return min(float64(b.used)/float64(b.budget), 1)
}

// batchPause is pause under the batch model: it waits until token i is
// due at the pace of the current batch, then holds the token's KV; a
// preemption (of this request, by any other's growth) is waited out and
// the lost tokens generated again first. It returns false when the client
// has gone.
func (g *generation) batchPause(i int, stream bool) bool {
	b := g.s.batch
	if i == 0 {
		g.due = g.start.Add(g.s.opts.TTFT)
	} else {
		g.due = g.due.Add(b.step())
	}
	if !g.sleepUntil(g.due, stream) {
		return false
	}
	for !b.grow(g.seq) {
		if !g.readmit(i, stream) {
			return false
		}
	}
	return true
}

// readmit waits until the preempted request runs again, then generates
// its first i tokens once more (their KV is gone; the client has them
// already, so nothing is sent), at the batch's pace. It returns false when
// the client has gone.
func (g *generation) readmit(i int, stream bool) bool {
	b := g.s.batch
	g.publish() // before the flush: what a client has read is already counted
	if stream && g.flush() != nil {
		return false
	}
	if !b.wait(g.seq, g.done) {
		g.running = false // the batch let go of it already
		return false
	}
	g.due = time.Now().Add(g.s.opts.TTFT)
	for range i {
		g.due = g.due.Add(b.step())
		if !g.sleepUntil(g.due, stream) {
			return false
		}
		if !b.grow(g.seq) {
			return true // preempted again: the caller waits anew
		}
		b.recomputed.Add(1)
	}
	return true
}

// sleepUntil waits until t, pushing what was gathered to the client first;
// false when the client has gone.
func (g *generation) sleepUntil(t time.Time, stream bool) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	g.publish() // before the flush: what a client has read is already counted
	if stream && g.flush() != nil {
		return false
	}
	if g.timer == nil {
		g.timer = time.NewTimer(d)
	} else {
		g.timer.Reset(d)
	}
	select {
	case <-g.timer.C:
		return true
	case <-g.done:
		g.timer.Stop()
		return false
	}
}
