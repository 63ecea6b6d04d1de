package sink

// The key set: the done (and failed) keys of a directory in memory of about
// a bit a row for row-index ids, 12 bytes a key for any other id loaded at
// Open, and 16 bytes a key for one added while a run writes or asks.
//
// A key whose id is a canonical decimal (no sign, no leading zero, below
// 2^40: a row index) is a bit in a bitmap of its sample, as long as the
// bitmap stays dense: it covers the words from its first key's on (not from
// row 0, so a run that completes a job from 50% holds its half in bits) and
// grows only while it spans at most 64 bits per key it holds (plus 2^16),
// so that a column of sparse numeric ids cannot make one key cost
// megabytes. Every other key is a 128-bit fingerprint (two xxHash64 of the
// key under different seeds). Loaded in bulk at Open, the fingerprints go
// to the packed store (packed.go: sorted, 12 bytes each, outside the Go
// heap). Added one at a time, they go to sorted runs: a small map (the
// tail, at most tailMax) takes inserts and is sorted into a run when full,
// runs of like size merge (so an insert costs O(log n) amortized), and a
// lookup tries the tail, the packed store and each run (at most
// log2(n/tailMax) of them; one after Compact). The set holds the keys for
// the sink, which hands it to the producer frozen, and the keys a run asked
// for the producer (with an id column).
//
// A fingerprint collision makes two keys one: the birthday bound gives a
// probability of about n^2/2^129 among n keys in runs (1.5e-23 at 10^8
// keys) and n^2/2^113 in the packed store, which keeps 112 of the 128 bits
// (9.6e-19 at 10^8 keys), far below a disk's undetected bit error rate over
// the same bytes.

import (
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// maxBitID bounds the ids a bitmap holds: 2^40 rows is beyond any dataset.
const maxBitID = 1 << 40

// tailMax is how many fingerprints wait unsorted before they become a run.
const tailMax = 4096

type fingerprint struct{ hi, lo uint64 }

func cmpFP(a, b fingerprint) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

// fingerprintOf hashes the key's sample and id (the sample as 8 bytes ahead
// of the id, so that no two keys are the same bytes).
func fingerprintOf(k Key) fingerprint {
	var d xxhash.Digest
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], uint64(k.Sample))
	d.ResetWithSeed(0x9e3779b97f4a7c15)
	_, _ = d.Write(s[:])
	_, _ = d.WriteString(k.ID)
	hi := d.Sum64()
	d.ResetWithSeed(0xc2b2ae3d27d4eb4f)
	_, _ = d.Write(s[:])
	_, _ = d.WriteString(k.ID)
	return fingerprint{hi: hi, lo: d.Sum64()}
}

// decimalID reads a canonical decimal id (a row index as the dataset writes
// it): digits, no sign, no leading zero, below maxBitID.
func decimalID(id string) (uint64, bool) {
	if id == "" || len(id) > 13 || (id[0] == '0' && len(id) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n < maxBitID
}

// bitmap is the rows of one sample whose key is in the set. It covers the
// words from base on, not from row 0: a run that completes a job from 50%
// writes (and asks) only the rows of the second half, and its bitmap must
// not have to reach back to row 0 to hold them (it would be too sparse, and
// every key would become a fingerprint of 16 bytes).
type bitmap struct {
	base  uint64 // index of the word words[0] is
	words []uint64
	n     int // bits set
}

func (b *bitmap) has(i uint64) bool {
	w := i / 64
	return w >= b.base && w-b.base < uint64(len(b.words)) && b.words[w-b.base]&(1<<(i%64)) != 0
}

// maxWords is how many words the bitmap may cover: 64 bits per key it
// holds, plus 2^16 bits.
func (b *bitmap) maxWords() uint64 { return uint64(b.n+1) + 1024 }

// fits says whether bit i may be set without the bitmap growing past 64
// bits per key it holds (plus 2^16 bits).
func (b *bitmap) fits(i uint64) bool {
	w := i / 64
	if len(b.words) == 0 {
		return true
	}
	end := b.base + uint64(len(b.words))
	return max(end, w+1)-min(b.base, w) <= b.maxWords()
}

// set sets bit i (fits(i) must hold, or the caller bounds i otherwise) and
// reports whether it was set before.
func (b *bitmap) set(i uint64) bool {
	w := i / 64
	if len(b.words) == 0 {
		b.base = w
	}
	if w < b.base {
		// Grow down by half again (ids read in descending order cost
		// amortized constant time), within the density bound and row 0.
		grow := b.base - w
		if room := b.maxWords(); room > uint64(len(b.words))+grow {
			grow = max(grow, min(uint64(len(b.words))/2, room-uint64(len(b.words))))
		}
		grow = min(grow, b.base)
		words := make([]uint64, uint64(len(b.words))+grow)
		copy(words[grow:], b.words)
		b.words, b.base = words, b.base-grow
	}
	d := int(w - b.base)
	if d >= len(b.words) {
		// Grow by half again, so that ids read in order cost amortized
		// constant time, within the density bound fits checks.
		n := max(d+1, min(len(b.words)+len(b.words)/2, b.n+1025))
		b.words = append(b.words, make([]uint64, n-len(b.words))...)
	}
	m := uint64(1) << (i % 64)
	if b.words[d]&m != 0 {
		return true
	}
	b.words[d] |= m
	b.n++
	return false
}

// KeySet is a set of keys (see the top of this file). The zero value is
// empty and ready; the producer keeps the keys a run asked in one too. It
// is not safe for concurrent use while it changes; once it stops changing,
// any number of goroutines may read it.
//
// Keys arrive in two ways. Add takes one key at a time and checks it (what
// a run writes). Bulk loading (newBulkKeySet, addBulk, finishBulk) is how
// Open reads a directory: a decimal id goes to the bitmap exactly when it is
// below a bound fixed up front (so its place does not depend on the order
// keys come in), every other key is appended unchecked, and finishBulk sorts
// them once and finds a duplicate among neighbours: far cheaper than a
// lookup per key.
type KeySet struct {
	bits []bitmap // by sample
	runs [][]fingerprint
	tail map[fingerprint]struct{}
	n    int
	// packed holds the fingerprints loaded in bulk (packed.go).
	packed *packedSet
	// bulk loading: bitLimit bounds the bitmap's ids; pending the
	// fingerprints not yet merged into packed; dup a fingerprint seen twice.
	bitLimit uint64
	hint     int
	pending  []fingerprint
	dup      *fingerprint
}

// newBulkKeySet returns a set to load with addBulk: hint is about how many
// keys it will hold; decimal ids below 64 bits per key of it go to the
// bitmaps (a row's bit then costs at most 8 bytes a key, one bit when the
// rows are dense).
func newBulkKeySet(hint int) *KeySet {
	return &KeySet{bitLimit: 64 * uint64(max(hint, 0)+65536), hint: hint}
}

// Len is the number of keys in the set.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Has reports whether k is in the set.
func (s *KeySet) Has(k Key) bool {
	if s == nil || s.n == 0 {
		return false
	}
	if i, ok := decimalID(k.ID); ok && k.Sample >= 0 && k.Sample < len(s.bits) && s.bits[k.Sample].has(i) {
		return true
	}
	if len(s.runs) == 0 && len(s.tail) == 0 && s.packed == nil {
		return false
	}
	return s.hasFP(fingerprintOf(k))
}

func (s *KeySet) hasFP(f fingerprint) bool {
	if _, ok := s.tail[f]; ok {
		return true
	}
	if s.packed.has(f) {
		return true
	}
	for _, r := range s.runs {
		if searchRun(r, f) {
			return true
		}
	}
	return false
}

// searchRun is a binary search of a sorted run, without the comparison
// function call of slices.BinarySearchFunc (a lookup searches every run).
func searchRun(r []fingerprint, f fingerprint) bool {
	lo, hi := 0, len(r)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c := r[m]; c.hi < f.hi || (c.hi == f.hi && c.lo < f.lo) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(r) && r[lo] == f
}

func (s *KeySet) bitmapOf(sample int) *bitmap {
	for len(s.bits) <= sample {
		s.bits = append(s.bits, bitmap{})
	}
	return &s.bits[sample]
}

// Add puts k in the set and reports whether it was there already.
func (s *KeySet) Add(k Key) (had bool) {
	if i, ok := decimalID(k.ID); ok && k.Sample >= 0 && k.Sample < 1<<16 {
		if k.Sample < len(s.bits) && s.bits[k.Sample].has(i) {
			return true
		}
		if b := s.bitmapOf(k.Sample); b.fits(i) {
			// Not in the bitmap; it may be a fingerprint, put there while
			// the bitmap was too sparse to reach it.
			if (len(s.runs) > 0 || len(s.tail) > 0 || s.packed != nil) && s.hasFP(fingerprintOf(k)) {
				return true
			}
			b.set(i)
			s.n++
			return false
		}
	}
	f := fingerprintOf(k)
	if s.hasFP(f) {
		return true
	}
	if s.tail == nil {
		s.tail = make(map[fingerprint]struct{}, tailMax)
	}
	s.tail[f] = struct{}{}
	s.n++
	if len(s.tail) >= tailMax {
		s.flush()
	}
	return false
}

// addBulk puts k in a set made by newBulkKeySet. It reports a duplicate
// of a key held in a bitmap at once (had); any other duplicate is found
// by finishBulk.
func (s *KeySet) addBulk(k Key) (had bool) {
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
		// follows, so the store is reserved for it (only the pages
		// written are resident).
		s.packed = newPackedSet(s.hint - s.n)
	}
	if s.pending == nil {
		s.pending = make([]fingerprint, 0, min(s.packed.chunk(), max(s.hint-s.n, 1024)))
	}
	s.pending = append(s.pending, fingerprintOf(k))
	s.n++
	if len(s.pending) >= s.packed.chunk() {
		s.mergePending()
	}
	return false
}

// mergePending sorts the pending fingerprints into the packed store,
// remembering the first duplicate seen.
func (s *KeySet) mergePending() {
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
		s.pending = make([]fingerprint, 0, s.packed.chunk())
		return
	}
	s.pending = p[:0]
}

// finishBulk merges what addBulk appended and returns the fingerprint of a
// key that came twice, if any (the set is then not usable: the caller
// finds the key by reading again, see recover.go).
func (s *KeySet) finishBulk() (dup fingerprint, found bool) {
	s.mergePending()
	s.pending = nil
	if s.dup != nil {
		return *s.dup, true
	}
	s.Compact()
	return fingerprint{}, false
}

// flush sorts the tail into a run and merges runs of like size.
func (s *KeySet) flush() {
	if len(s.tail) == 0 {
		return
	}
	r := make([]fingerprint, 0, len(s.tail))
	for f := range s.tail {
		r = append(r, f)
	}
	slices.SortFunc(r, cmpFP)
	clear(s.tail)
	for len(s.runs) > 0 && len(s.runs[len(s.runs)-1]) <= 2*len(r) {
		last := len(s.runs) - 1
		r = mergeRuns(s.runs[last], r)
		s.runs[last] = nil // the backing array must not keep the old run
		s.runs = s.runs[:last]
	}
	s.runs = append(s.runs, r)
}

// Compact merges every fingerprint into one run of exactly its size: done
// once the set stops changing, so that it holds 16 bytes a fingerprint and
// a lookup is one binary search.
func (s *KeySet) Compact() {
	s.flush()
	s.tail = nil
	for len(s.runs) > 1 {
		n := len(s.runs)
		s.runs[n-2] = mergeRuns(s.runs[n-2], s.runs[n-1])
		s.runs[n-1] = nil
		s.runs = s.runs[:n-1]
	}
	for i := range s.bits {
		s.bits[i].words = slices.Clip(s.bits[i].words)
	}
}

func mergeRuns(a, b []fingerprint) []fingerprint {
	out := make([]fingerprint, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if cmpFP(a[0], b[0]) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
