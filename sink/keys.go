package sink

// What the sink knows of keys: done, failed, durable, and what Open
// recovered (frozen, for the goroutine that decides what to ask).

import (
	"maps"

	"github.com/synthgen/synthgen/sink/keyset"
)

// Done reports whether a record for k exists: recovered from disk at Open,
// or written by this Sink (durable after the next sync).
func (s *Sink) Done(k Key) bool {
	return s.done.Has(k) || s.written.Has(k)
}

// Failed reports whether k has an error record and no record superseded it.
func (s *Sink) Failed(k Key) bool {
	return s.hasFailed(k) && !s.Done(k)
}

func (s *Sink) hasFailed(k Key) bool {
	return s.failed.Has(k) || s.failedNow.Has(k)
}

// Seen reports whether this run wrote a record or an error record for k.
// Unlike the owner's methods, it may be called from any goroutine while the
// owner writes: the producer asks it instead of keeping a second set of the
// keys it asked.
func (s *Sink) Seen(k Key) bool {
	s.keysMu.RLock()
	defer s.keysMu.RUnlock()
	return s.written.Has(k) || s.failedNow.Has(k)
}

// ReserveKeys says about how many keys this run will write, so that their
// set is sized once instead of grown (string ids: the packed store's
// region, reserved, resident only as it fills; see keyset.Set.Reserve).
func (s *Sink) ReserveKeys(n int) {
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	s.written.Reserve(n)
}

// DoneCount is the number of done keys. It may be called from any
// goroutine.
func (s *Sink) DoneCount() int {
	s.keysMu.RLock()
	defer s.keysMu.RUnlock()
	return s.done.Len() + s.written.Len()
}

// Durable is how many records and error records this run wrote that are
// fsynced. Until a write fails it trails what Write and WriteError took by
// at most SyncInterval; after a failed write or fsync (a full disk) it is
// what the run can count as kept: lines written after the last successful
// fsync may be lost with the page cache (a resume finds what survived).
func (s *Sink) Durable() (records, errors int) { return s.durableRecs, s.durableErrs }

// FailedCount is the number of failed keys not superseded by a record.
func (s *Sink) FailedCount() int { return s.failedOpen }

// Recovered is what Open found on disk. It does not change afterwards, so
// the goroutine deciding which keys to ask reads it while the writer
// writes; what this run asks is that goroutine's own business.
func (s *Sink) Recovered() Recovered { return Recovered{done: s.done, failed: s.failed} }

// Recovered is the keys an output directory held when it was opened: those
// with a record, and those that failed for good. It holds about a bit a key
// for row-index ids and 12 bytes a key for others, outside the heap
// (package sink/keyset).
type Recovered struct {
	done, failed *keyset.Set
}

// Done reports whether k had a record.
func (r Recovered) Done(k Key) bool { return r.done.Has(k) }

// Failed reports whether k had an error record and no record.
func (r Recovered) Failed(k Key) bool { return r.failed.Has(k) && !r.Done(k) }

// Visits are the marks one pass over the dataset leaves on the keys a
// directory held, so that a row whose key an earlier row of the pass had
// (a repeated id) is told from a key found done (about a bit a key).
type Visits struct {
	done, failed *keyset.Marks
}

// Visits returns marks of r's keys, none visited. They belong to the
// goroutine that reads the dataset.
func (r Recovered) Visits() *Visits {
	return &Visits{done: r.done.Marks(), failed: r.failed.Marks()}
}

// Visit reports whether k had a record (done) or else an error record and
// no record (failed), and when it had either, whether this pass visited it
// before; it marks k visited.
func (v *Visits) Visit(k Key) (done, failed, before bool) {
	if in, b := v.done.Visit(k); in {
		return true, false, b
	}
	in, b := v.failed.Visit(k)
	return false, in, b
}

// Manifest returns a copy of the manifest as last written (for tests); its
// slices are not shared with the Sink.
func (s *Sink) Manifest() Manifest {
	m := *s.man
	m.Parts = append([]PartInfo(nil), m.Parts...)
	m.Runs = append([]Run(nil), m.Runs...)
	m.Jobs = maps.Clone(m.Jobs)
	return m
}
