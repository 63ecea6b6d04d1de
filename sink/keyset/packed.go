package keyset

// The packed store: the fingerprints of a Set (string ids: loaded in bulk
// at sink.Open from every part, or added one at a time during a run),
// sorted, in 12 bytes each instead of 16, outside the Go heap.
//
// A fingerprint's top 16 bits are its bucket: the entries of bucket b are
// entries off[b] to off[b+1]-1, in order, and each holds the next 96 bits
// (hi's low 48, then lo's high 48); lo's low 16 bits are dropped. The store
// thus tells keys apart by 112 bits: a collision among n keys has a
// probability of about n^2/2^113, 9.6e-23 at 10^6 keys and 9.6e-19 at 10^8,
// still far below a disk's undetected error rate over the same bytes (the
// package comment), for 12 bytes a key rather than 14. The entries live in
// a region of their own (mmap'd where the platform has it:
// packed_mmap_unix.go), so that they count once in the process's memory: neither in the garbage collector's
// pacing (which lets garbage grow to the size of the live heap) nor twice
// while it grows (on Linux by mremap, which moves pages without copying
// them: packed_mmap_linux.go); the region is reserved from the number of
// records the manifest lists or from Set.Reserve, and only the pages
// written are resident.
//
// Keys come in chunks: AddBulk collects fingerprints in a small slice on the
// heap (Set.Add in a map, keyset.go), which is sorted and merged into the
// store from the back, in place, when full: a search a key (search) and one
// copy of the entries above it. A chunk holds at least 16,384 keys (256 KB
// of heap) and a thirty-second of the store (a sixty-fourth for Add), so
// that the heap stays small beside the store while the copies stay
// affordable: each merge moves the entries above its smallest key, so the
// cost grows as n log n (BenchmarkKeySetBulkLoad; the figures:
// docs/decisions/2026-11-packed-key-store.md).

import (
	"encoding/binary"
	"runtime"
)

const (
	packedEntry   = 12 // bytes an entry
	packedBuckets = 1 << 16
	packedLowMask = 1<<48 - 1
	// packedChunkMin is the fewest keys a chunk takes before it merges.
	packedChunkMin = 1 << 14
)

// packedSet is a sorted set of fingerprints in 12 bytes each (112 bits). Its region is
// released when the set is garbage collected.
type packedSet struct {
	mem *region  // entries, n*packedEntry bytes used
	n   int      // entries
	off []uint32 // packedBuckets+1 offsets
	// heap puts the regions on the heap (a test hook: as where the kernel
	// refuses the mapping); remaps and copies count how the region grew.
	heap           bool
	remaps, copies int
}

// region is memory outside the Go heap (or a plain slice where mmap is not
// available), freed by free or else by a cleanup once unreachable.
type region struct {
	b     []byte
	state *regionState
}

// regionState is what the cleanup sees (not the region, which it would
// keep reachable): the mapping and whether free unmapped it already.
type regionState struct {
	b      []byte
	mapped bool // b is a mapping (else a heap slice)
	freed  bool
}

// remapRegion resizes a mapping, moving its pages rather than copying them
// (nil where the platform cannot: packed_mmap_linux.go sets it).
var remapRegion func(b []byte, size int) ([]byte, error)

// newRegion maps want bytes (address space: only the pages written become
// resident) or, where the kernel refuses that, need bytes; where it
// refuses those too (strict overcommit, a ulimit on address space) or the
// platform has no mmap, or heap is set, the region is a heap slice of need
// bytes: the same keys, only counted by the collector.
func newRegion(want, need int, heap bool) *region {
	need = max(need, 1)
	want = max(want, need)
	var b []byte
	mapped := false
	if !heap {
		for _, size := range []int{want, need} {
			var err error
			if b, err = mapRegion(size); err == nil {
				mapped = true
				break
			}
		}
	}
	if !mapped {
		b = make([]byte, need)
	}
	st := &regionState{b: b, mapped: mapped}
	r := &region{b: st.b, state: st}
	runtime.AddCleanup(r, func(st *regionState) {
		if !st.freed && st.mapped {
			_ = unmapRegion(st.b)
		}
	}, st)
	return r
}

// free unmaps the region now: a region outgrown is resident until then,
// and the collector, which does not see it, may not run for a while. r
// must not be used afterwards.
func (r *region) free() {
	if !r.state.freed {
		r.state.freed = true
		if r.state.mapped {
			_ = unmapRegion(r.state.b)
		}
	}
	r.b = nil
}

// remap makes a mapped region size bytes where the platform resizes a
// mapping in place or moves its pages (Linux): its bytes stay, none is
// copied, and no page is resident twice. It reports false, the region
// unchanged, where it cannot.
func (r *region) remap(size int) bool {
	if !r.state.mapped || remapRegion == nil {
		return false
	}
	b, err := remapRegion(r.b, size)
	if err != nil {
		return false
	}
	r.b, r.state.b = b, b
	return true
}

// newPackedSet returns a store with room reserved for hint entries, of
// which it must hold need at once where the reservation is refused.
func newPackedSet(hint, need int, heap bool) *packedSet {
	return &packedSet{
		mem:  newRegion(max(hint, packedChunkMin)*packedEntry, max(need, packedChunkMin)*packedEntry, heap),
		off:  make([]uint32, packedBuckets+1),
		heap: heap,
	}
}

// grow makes the region size bytes, keeping the entries: by remapping
// where the platform can, else by copying them into a new region (for a
// moment both are resident: 2.5 times the entries' bytes).
func (p *packedSet) grow(size int) {
	if p.mem.remap(size) {
		p.remaps++
		return
	}
	r := newRegion(size, size, p.heap)
	copy(r.b, p.mem.b[:p.n*packedEntry])
	p.mem.free()
	p.mem = r
	p.copies++
}

// reserve extends the region to entries where that moves no entry
// (Set.Reserve): a hint, ignored where the platform would copy.
func (p *packedSet) reserve(entries int) {
	if size := entries * packedEntry; size > len(p.mem.b) && p.mem.remap(size) {
		p.remaps++
	}
}

// chunk is how many keys AddBulk collects before a merge.
func (p *packedSet) chunk() int { return max(packedChunkMin, p.n/32) }

func packedBucket(f Fingerprint) int { return int(f.hi >> 48) }

// packedBits is what an entry holds of f: hi's low 48 bits and lo's high 48.
func packedBits(f Fingerprint) (hi48, lo48 uint64) { return f.hi & packedLowMask, f.lo >> 16 }

// samePacked says whether two fingerprints are one key to the store (the
// same 112 bits).
func samePacked(a, b Fingerprint) bool { return a.hi == b.hi && a.lo>>16 == b.lo>>16 }

func (p *packedSet) entry(i int) (hi48, lo48 uint64) {
	e := p.mem.b[i*packedEntry : (i+1)*packedEntry]
	hi48 = uint64(binary.BigEndian.Uint16(e[0:2]))<<32 | uint64(binary.BigEndian.Uint32(e[2:6]))
	lo48 = uint64(binary.BigEndian.Uint16(e[6:8]))<<32 | uint64(binary.BigEndian.Uint32(e[8:12]))
	return hi48, lo48
}

func (p *packedSet) put(i int, f Fingerprint) {
	e := p.mem.b[i*packedEntry : (i+1)*packedEntry]
	hi48, lo48 := packedBits(f)
	binary.BigEndian.PutUint16(e[0:2], uint16(hi48>>32))
	binary.BigEndian.PutUint32(e[2:6], uint32(hi48))
	binary.BigEndian.PutUint16(e[6:8], uint16(lo48>>32))
	binary.BigEndian.PutUint32(e[8:12], uint32(lo48))
}

// search returns the first index in [lo, hi) whose entry is not below
// (want, wantLo), or hi. lo is a bucket's first entry and bucketEnd its end
// (hi may stop short of it while a merge moves entries). An entry's bits
// are a hash's, spread evenly over a bucket: the search starts where want
// sits in proportion to the bucket and gallops out (1, 2, 4... entries) to
// bracket the answer, then halves the bracket. A binary search of a
// bucket of 150 entries (10^7 keys) takes 8 probes that land on 5 or 6
// cache lines, each a miss once the store outgrows the cache; this one
// mostly stays within two or three. Any spread gives the right answer, only
// more probes.
func (p *packedSet) search(lo, hi, bucketEnd int, want, wantLo uint64) int {
	below := func(i int) bool {
		h, l := p.entry(i)
		return h < want || (h == want && l < wantLo)
	}
	if hi-lo > 8 {
		// want>>16 < 2^32 and a bucket < 2^32 entries: no overflow.
		g := min(lo+int((want>>16)*uint64(bucketEnd-lo)>>32), hi-1)
		if below(g) {
			// The answer is in (g, hi].
			l := g + 1
			for step := 1; ; step *= 2 {
				n := g + step
				if n >= hi {
					lo = l
					break
				}
				if !below(n) {
					lo, hi = l, n
					break
				}
				l = n + 1
			}
		} else {
			// The answer is in [lo, g].
			h := g
			for step := 1; ; step *= 2 {
				n := g - step
				if n < lo {
					hi = h
					break
				}
				if below(n) {
					lo, hi = n+1, h
					break
				}
				h = n
			}
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if below(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (p *packedSet) has(f Fingerprint) bool {
	_, found := p.find(f)
	return found
}

// find is the entry holding f, if one does.
func (p *packedSet) find(f Fingerprint) (int, bool) {
	if p == nil || p.n == 0 {
		return 0, false
	}
	b := packedBucket(f)
	want, wantLo := packedBits(f)
	lo := p.search(int(p.off[b]), int(p.off[b+1]), int(p.off[b+1]), want, wantLo)
	found := false
	if lo < int(p.off[b+1]) {
		h, l := p.entry(lo)
		found = h == want && l == wantLo
	}
	runtime.KeepAlive(p.mem)
	return lo, found
}

// merge adds the sorted, duplicate-free chunk c. It returns a fingerprint
// both hold, if any (the store is then not usable: the caller refuses the
// directory).
func (p *packedSet) merge(c []Fingerprint) (dup Fingerprint, found bool) {
	if len(c) == 0 {
		return Fingerprint{}, false
	}
	if need := (p.n + len(c)) * packedEntry; need > len(p.mem.b) {
		// More keys than reserved (a manifest that lists fewer records
		// than the parts hold, keys added during a run beyond Reserve):
		// grow by half again.
		p.grow(max(need, len(p.mem.b)+len(p.mem.b)/2))
	}
	// From the back: each key of the chunk, largest first, finds its place
	// among the store's entries not yet moved (a binary search in its
	// bucket), the entries above it move up in one copy, and it is written
	// below them. The write position stays above the entries not yet
	// moved, which are in place once the chunk is used up.
	end, w := p.n, p.n+len(c)
	for j := len(c) - 1; j >= 0; j-- {
		f := c[j]
		b := packedBucket(f)
		bucketEnd := int(p.off[b+1])
		hi := min(bucketEnd, end)
		want, wantLo := packedBits(f)
		lo := p.search(min(int(p.off[b]), hi), hi, bucketEnd, want, wantLo)
		if lo < min(int(p.off[b+1]), end) {
			if h, l := p.entry(lo); h == want && l == wantLo {
				runtime.KeepAlive(p.mem)
				return f, true
			}
		}
		k := end - lo
		copy(p.mem.b[(w-k)*packedEntry:w*packedEntry], p.mem.b[lo*packedEntry:end*packedEntry])
		w, end = w-k-1, lo
		p.put(w, f)
	}
	p.n += len(c)
	// The new offsets, in place (the searches above needed the old ones):
	// each bucket starts after the chunk's keys of every bucket before it.
	j := 0
	for b := range packedBuckets + 1 {
		for j < len(c) && packedBucket(c[j]) < b {
			j++
		}
		p.off[b] += uint32(j)
	}
	runtime.KeepAlive(p.mem)
	return Fingerprint{}, false
}
