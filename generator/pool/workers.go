package pool

// The pool: a fixed set of long-lived workers (Concurrency of them, the
// ceiling) pulling keys from the producer, and a limiter that lets at most
// limit of them hold a key at once. limit is Concurrency for a fixed
// concurrency, and moves at run time under concurrency: auto (generator/autoconc).
// Workers live as long as the run, so their stacks grow once, not once per
// request as a goroutine per request's would (the figures:
// docs/decisions/2026-11-long-lived-workers.md).

import (
	"sync"

	"golang.org/x/sync/errgroup"
)

// limiter admits at most limit holders at once; the limit may change while
// holders hold: growing admits waiters at once, shrinking lets the holders
// finish and admits nobody until fewer than the new limit hold.
type limiter struct {
	mu     sync.Mutex
	cond   sync.Cond
	limit  int
	held   int
	closed bool
}

func newLimiter(limit int) *limiter {
	l := &limiter{limit: max(limit, 1)}
	l.cond.L = &l.mu
	return l
}

// acquire waits for a place; false once the limiter is closed.
func (l *limiter) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.held >= l.limit {
		l.cond.Wait()
	}
	if l.closed {
		return false
	}
	l.held++
	return true
}

func (l *limiter) release() {
	l.mu.Lock()
	l.held--
	wake := l.held < l.limit
	l.mu.Unlock()
	if wake {
		l.cond.Signal()
	}
}

// set changes the limit (at least 1) and reports the one in force before.
func (l *limiter) set(n int) (old int) {
	l.mu.Lock()
	old, l.limit = l.limit, max(n, 1)
	l.mu.Unlock()
	l.cond.Broadcast()
	return old
}

func (l *limiter) get() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// close wakes every waiter for good: acquire returns false from now on.
func (l *limiter) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cond.Broadcast()
}

// pool is workers workers under one errgroup, each taking a place in lim
// before it takes a key from jobs, so that at most lim's limit keys are
// in flight and the producer's send blocks while all of them are.
type pool struct {
	jobs chan task
	lim  *limiter
	g    errgroup.Group
}

// startPool starts workers workers that run each key they take with do.
func startPool(workers int, lim *limiter, do func(task)) *pool {
	p := &pool{jobs: make(chan task), lim: lim}
	for range workers {
		p.g.Go(func() error {
			for lim.acquire() {
				j, ok := <-p.jobs
				if !ok {
					lim.release()
					return nil
				}
				do(j)
				lim.release()
			}
			return nil
		})
	}
	return p
}

// submit hands j to a free worker, waiting while limit keys are in flight.
func (p *pool) submit(j task) { p.jobs <- j }

// wait ends intake and returns once every worker has finished its key.
func (p *pool) wait() {
	close(p.jobs)
	p.lim.close()
	_ = p.g.Wait() // workers never return an error
}
