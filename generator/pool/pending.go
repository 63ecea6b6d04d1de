package pool

// The keys in flight: asked by the producer, not yet recorded by the
// writer. With a sink that can say what this run wrote (seenSink), the
// producer's memory of what it asked is that sink's plus this set, which
// holds at most the keys in flight, instead of a second set of every key
// the run asked (ARCHITECTURE.md, "Measured decisions").

import (
	"sync"

	"github.com/synthgen/synthgen/sink"
)

// seenSink is a sink that tells, from any goroutine, whether this run
// wrote a record or an error record for k. *sink.Sink is one.
type seenSink interface {
	Seen(k sink.Key) bool
}

var _ seenSink = (*sink.Sink)(nil)

// pendingKeys are the keys handed to the pool whose result the writer has
// not yet taken. The producer adds a key before it is started; the writer
// removes it only after the sink took its record (so that at every moment
// an asked key is pending, seen by the sink, or both) or after it ended
// with none (the run is stopping).
type pendingKeys struct {
	mu sync.Mutex
	m  map[sink.Key]struct{}
}

func (p *pendingKeys) add(k sink.Key) {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[sink.Key]struct{})
	}
	p.m[k] = struct{}{}
	p.mu.Unlock()
}

func (p *pendingKeys) has(k sink.Key) bool {
	p.mu.Lock()
	_, ok := p.m[k]
	p.mu.Unlock()
	return ok
}

func (p *pendingKeys) remove(k sink.Key) {
	p.mu.Lock()
	delete(p.m, k)
	p.mu.Unlock()
}

// len is how many keys are pending (the tests check none is left).
func (p *pendingKeys) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
