// Package keyset holds the keys (id, sample) of an output directory's
// records in little memory: the Set of the done (and failed) keys, about a
// bit a row for row-index ids and 12 bytes a key for any other id, loaded
// at sink.Open or added while a run writes or asks, and a part's Summary,
// its keys as its entry in the manifest lists them.
//
// A key whose id is a canonical decimal (no sign, no leading zero, below
// 2^40: a row index) is a bit in a bitmap of its sample, as long as the
// bitmap stays dense: it covers the words from its first key's on (not from
// row 0, so a run that completes a job from 50% holds its half in bits) and
// grows only while it spans at most 64 bits per key it holds (plus 2^16),
// so that a column of sparse numeric ids cannot make one key cost
// megabytes (bitmap.go). Every other key is a 128-bit fingerprint (two
// xxHash64 of the key under different seeds: fingerprint.go), kept in the
// packed store (packed.go: sorted, 12 bytes each, 112 of the bits, outside
// the Go heap). Loaded in bulk at Open, the fingerprints reach it in chunks
// sorted once. Added one at a time, they wait in a map (the tail, for
// lookups while it fills) until it holds a chunk (tailLimit), which is then
// sorted and merged into the store; a lookup tries the bitmap, the tail and
// the store. A set holds the keys for the sink, which hands it to the
// producer frozen, and the keys a run asked for the producer (with an id
// column).
//
// A fingerprint collision makes two keys one: the birthday bound gives a
// probability of about n^2/2^113 among n keys (the store keeps 112 of the
// 128 bits, and the tail compares those too): 9.6e-19 at 10^8 keys, far
// below a disk's undetected bit error rate over the same bytes.
package keyset

import (
	"fmt"
	"slices"
)

// Key identifies a record: a prompt id and the sample number.
type Key struct {
	ID     string
	Sample int
}

// Set is a set of keys (see the package comment). The zero value is
// empty and ready; the producer keeps the keys a run asked in one too. It
// is not safe for concurrent use while it changes; once it stops changing,
// any number of goroutines may read it.
//
// Keys arrive in two ways. Add takes one key at a time and checks it (what
// a run writes). Bulk loading (NewBulk, AddBulk, FinishBulk) is how
// sink.Open reads a directory: a decimal id goes to the bitmap exactly when
// it is below a bound fixed up front (so its place does not depend on the
// order keys come in), every other key is appended unchecked, and
// FinishBulk sorts them once and finds a duplicate among neighbours: far
// cheaper than a lookup per key. Either way the fingerprints end in the packed store.
type Set struct {
	bits []bitmap // by sample
	// tail holds the fingerprints Add took since the last merge into
	// packed, as the store sees them (tailFP); scratch is the slice they
	// are sorted in for the merge, kept for the next.
	tail    map[Fingerprint]struct{}
	scratch []Fingerprint
	n       int
	// packed holds the fingerprints (packed.go); reserve is what Reserve
	// announced before it existed.
	packed  *packedSet
	reserve int
	// bulk loading: bitLimit bounds the bitmap's ids; pending the
	// fingerprints not yet merged into packed; dup a fingerprint seen twice.
	bitLimit uint64
	hint     int
	pending  []Fingerprint
	dup      *Fingerprint
	// Test hooks: tailMin, when set, is the fewest fingerprints the tail
	// takes before it merges (else packedChunkMin); heapRegions puts the
	// store on the heap, as where the kernel refuses the mapping.
	tailMin     int
	heapRegions bool
}

// maxReserve bounds what Reserve adds up (2^36 keys: 768 GB of entries),
// so that a wild hint cannot overflow the region's size.
const maxReserve = 1 << 36

// NewBulk returns a set to load with AddBulk: hint is about how many
// keys it will hold; decimal ids below 64 bits per key of it go to the
// bitmaps (a row's bit then costs at most 8 bytes a key, one bit when the
// rows are dense).
func NewBulk(hint int) *Set {
	return &Set{bitLimit: 64 * uint64(max(hint, 0)+65536), hint: hint}
}

// Len is the number of keys in the set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Reserve says that about n more keys with fingerprints (ids other than
// row indices) will be added: the packed store reserves room for them up
// front, so that it grows no more while they come. Reserving costs address
// space, not memory: only the pages written become resident. Before the
// set's first fingerprint the hint sizes the store it then makes; after,
// it extends the store's mapping where the kernel moves pages without
// copying (Linux: mremap), and is ignored elsewhere and on the heap (the
// store then grows by half again when full). Any set takes it, at any time.
func (s *Set) Reserve(n int) {
	if s == nil || n <= 0 {
		return
	}
	n = min(n, maxReserve)
	if s.packed == nil {
		s.reserve = min(s.reserve+n, maxReserve)
		return
	}
	s.packed.reserve(min(s.packed.n+len(s.tail)+len(s.pending)+n, maxReserve))
}

// newPacked makes the set's packed store for about hint fingerprints; need
// is how many it must hold at once where the hint cannot be reserved.
func (s *Set) newPacked(hint, need int) *packedSet {
	hint = min(hint+s.reserve, maxReserve)
	s.reserve = 0
	return newPackedSet(hint, need, s.heapRegions)
}

// Has reports whether k is in the set.
func (s *Set) Has(k Key) bool {
	if s == nil || s.n == 0 {
		return false
	}
	if i, ok := decimalID(k.ID); ok && k.Sample >= 0 && k.Sample < len(s.bits) && s.bits[k.Sample].has(i) {
		return true
	}
	if len(s.tail) == 0 && s.packed == nil {
		return false
	}
	return s.hasFP(FingerprintOf(k))
}

// tailFP is f as the packed store tells keys apart (samePacked): lo's low
// 16 bits, which it does not keep, cleared. The tail holds fingerprints so,
// so that two keys are one to the tail exactly when they are one to the
// store, and a merge of the tail never meets a key the store holds.
func tailFP(f Fingerprint) Fingerprint {
	f.lo &^= 1<<16 - 1
	return f
}

func (s *Set) hasFP(f Fingerprint) bool {
	if _, ok := s.tail[tailFP(f)]; ok {
		return true
	}
	return s.packed.has(f)
}

func (s *Set) bitmapOf(sample int) *bitmap {
	for len(s.bits) <= sample {
		s.bits = append(s.bits, bitmap{})
	}
	return &s.bits[sample]
}

// Add puts k in the set and reports whether it was there already.
func (s *Set) Add(k Key) (had bool) {
	if i, ok := decimalID(k.ID); ok && k.Sample >= 0 && k.Sample < 1<<16 {
		if k.Sample < len(s.bits) && s.bits[k.Sample].has(i) {
			return true
		}
		if b := s.bitmapOf(k.Sample); b.fits(i) {
			// Not in the bitmap; it may be a fingerprint, put there while
			// the bitmap was too sparse to reach it.
			if (len(s.tail) > 0 || s.packed != nil) && s.hasFP(FingerprintOf(k)) {
				return true
			}
			b.set(i)
			s.n++
			return false
		}
	}
	f := FingerprintOf(k)
	if s.hasFP(f) {
		return true
	}
	if s.tail == nil {
		s.tail = make(map[Fingerprint]struct{}, s.tailSize())
	}
	s.tail[tailFP(f)] = struct{}{}
	s.n++
	if len(s.tail) >= s.tailLimit() {
		s.mergeTail()
	}
	return false
}

// tailLimit is how many fingerprints the tail takes before it merges into
// the packed store: at least 16,384 and a sixty-fourth of the store, so
// that the heap holds a small part of the keys (the map costs about 35
// bytes a fingerprint, the sorted copy 16) while a merge, which moves the
// store's entries above the smallest key merged, comes rarely enough:
// about 768 bytes moved a key merged, whatever the store's size. (A bulk
// load's chunk is a thirty-second, packed.go: a run's set lives on beside
// everything else the run holds; measured in ARCHITECTURE.md. A minimum
// of 4,096 measured more peak RSS at 10^6 keys, 16.2 bytes a key against
// 14.4: the limit then grows all along, and the map and slice with it.)
func (s *Set) tailLimit() int {
	m := packedChunkMin
	if s.tailMin > 0 {
		m = s.tailMin
	}
	if s.packed != nil {
		m = max(m, s.packed.n/64)
	}
	return m
}

// tailSize is what the tail's map is made for: where Reserve announced
// keys, the limit they will bring it to (up to that of 8M keys), so that
// the map does not grow while they come (growing leaves garbage, and the
// collector its headroom over it); else the limit once a store exists;
// else nothing: the failed keys, a few if any, start small.
func (s *Set) tailSize() int {
	switch {
	case s.reserve > 0:
		return max(s.tailLimit(), min(s.reserve/64, 1<<17))
	case s.packed != nil:
		return s.tailLimit()
	}
	return 0
}

// mergeTail sorts the tail into the packed store and clears it (keeping
// the map and the scratch slice for the next).
func (s *Set) mergeTail() {
	if len(s.tail) == 0 {
		return
	}
	if s.packed == nil {
		s.packed = s.newPacked(len(s.tail), len(s.tail))
	}
	c := s.scratch[:0]
	if cap(c) < len(s.tail) {
		// A quarter over the tail, as its limit grows with the store:
		// appending would leave a trail of smaller slices for the
		// collector, and its headroom over them.
		c = make([]Fingerprint, 0, len(s.tail)+len(s.tail)/4)
	}
	for f := range s.tail {
		c = append(c, f)
	}
	slices.SortFunc(c, cmpFP)
	if f, found := s.packed.merge(c); found {
		// Add looked every key up in the store first, as the store
		// tells keys apart: this is a bug, and the store is now unusable.
		panic(fmt.Sprintf("keyset: fingerprint %x added once is in the packed store already (a bug in sink/keyset)", f))
	}
	clear(s.tail)
	s.scratch = c[:0]
}

// AddBulk puts k in a set made by NewBulk. It reports a duplicate
// of a key held in a bitmap at once (had); any other duplicate is found
// by FinishBulk.
func (s *Set) AddBulk(k Key) (had bool) {
	if i, ok := decimalID(k.ID); ok && i < s.bitLimit && k.Sample >= 0 && k.Sample < 1<<16 {
		b := s.bitmapOf(k.Sample)
		if b.set(i) {
			return true
		}
		s.n++
		return false
	}
	if s.packed == nil {
		// The first key without a bit: the rest of the hint likely
		// follows (the manifest lists it), so the store is reserved for
		// it (only the pages written are resident).
		s.packed = s.newPacked(s.hint-s.n, s.hint-s.n)
	}
	if s.pending == nil {
		s.pending = make([]Fingerprint, 0, min(s.packed.chunk(), max(s.hint-s.n, 1024)))
	}
	s.pending = append(s.pending, FingerprintOf(k))
	s.n++
	if len(s.pending) >= s.packed.chunk() {
		s.mergePending()
	}
	return false
}

// mergePending sorts the pending fingerprints into the packed store,
// remembering the first duplicate seen.
func (s *Set) mergePending() {
	p := s.pending
	if len(p) == 0 || s.dup != nil {
		s.pending = p[:0]
		return
	}
	slices.SortFunc(p, cmpFP)
	for i := 1; i < len(p); i++ {
		if samePacked(p[i], p[i-1]) {
			d := p[i]
			s.dup = &d
			s.pending = p[:0]
			return
		}
	}
	if f, found := s.packed.merge(p); found {
		s.dup = &f
		s.pending = p[:0]
		return
	}
	if cap(p) < s.packed.chunk() {
		// A thirty-second of the store: the next chunk grows with it.
		s.pending = make([]Fingerprint, 0, s.packed.chunk())
		return
	}
	s.pending = p[:0]
}

// FinishBulk merges what AddBulk appended and returns the fingerprint
// (FingerprintOf) of a key that came twice, if any (the set is then not usable: the caller
// finds the key by reading again, as sink.Open does).
func (s *Set) FinishBulk() (dup Fingerprint, found bool) {
	s.mergePending()
	s.pending = nil
	if s.dup != nil {
		return *s.dup, true
	}
	s.Compact()
	return Fingerprint{}, false
}

// Compact is for a set that stopped changing: the tail merges into the
// packed store (a set that never filled a tail has no store and keeps its
// small map: at most a chunk of keys, cheaper than a store's offsets), and
// the sorted scratch slice and the bitmaps' spare capacity go. The set
// may still change afterwards.
func (s *Set) Compact() {
	if s.packed != nil {
		s.mergeTail()
		s.tail = nil
	}
	s.scratch = nil
	for i := range s.bits {
		s.bits[i].words = slices.Clip(s.bits[i].words)
	}
}
