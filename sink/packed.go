package sink

// The packed store: the fingerprints Open loads in bulk (string ids, read
// from every shard at each resume), sorted, in 14 bytes each instead of 16,
// outside the Go heap.
//
// A fingerprint's top 16 bits are its bucket: the entries of bucket b are
// entries off[b] to off[b+1]-1, in order, and each holds the other 112 bits
// (hi's low 48, then lo). Nothing of the 128 bits is lost, so a collision is
// as unlikely as before (keyset.go). The entries live in a region of their
// own (mmap'd where the platform has it: packed_mmap_unix.go), so that they
// count once in the process's memory: neither in the garbage collector's
// pacing (which lets garbage grow to the size of the live heap) nor twice
// while a slice grows by copying; the region is reserved from the number of
// records the manifest lists, and only the pages written are resident.
//
// Keys come in chunks: addBulk collects fingerprints in a small slice on the
// heap, which is sorted and merged into the store from the back, in place,
// when full. A chunk holds at least 65,536 keys and a sixteenth of the store
// (1 MB of heap until a million keys), so that a load costs O(n) moves
// amortized per sixteenth: about 16n moves of 14 bytes for n keys.

import (
	"encoding/binary"
	"runtime"
)

const (
	packedEntry   = 14 // bytes an entry
	packedBuckets = 1 << 16
	packedLowMask = 1<<48 - 1
	// packedChunkMin is the fewest keys a chunk takes before it merges.
	packedChunkMin = 1 << 16
)

// packedSet is a sorted set of fingerprints in 14 bytes each. Its region is
// released when the set is garbage collected.
type packedSet struct {
	mem  *region  // entries, n*packedEntry bytes used
	n    int      // entries
	off  []uint32 // packedBuckets+1 offsets
	next []uint32 // scratch for the offsets of a merge
}

// region is memory outside the Go heap (or a plain slice where mmap is not
// available), freed by a cleanup once unreachable.
type region struct{ b []byte }

func newRegion(size int) *region {
	r := &region{b: allocRegion(size)}
	runtime.AddCleanup(r, freeRegion, r.b)
	return r
}

func newPackedSet(hint int) *packedSet {
	return &packedSet{
		mem: newRegion(max(hint, packedChunkMin) * packedEntry),
		off: make([]uint32, packedBuckets+1),
	}
}

// chunk is how many keys addBulk collects before a merge.
func (p *packedSet) chunk() int { return max(packedChunkMin, p.n/16) }

func packedBucket(f fingerprint) int { return int(f.hi >> 48) }

func (p *packedSet) entry(i int) (hi48, lo uint64) {
	e := p.mem.b[i*packedEntry : (i+1)*packedEntry]
	hi48 = uint64(e[0])<<40 | uint64(e[1])<<32 | uint64(binary.BigEndian.Uint32(e[2:6]))
	return hi48, binary.BigEndian.Uint64(e[6:14])
}

func (p *packedSet) put(i int, f fingerprint) {
	e := p.mem.b[i*packedEntry : (i+1)*packedEntry]
	hi48 := f.hi & packedLowMask
	e[0], e[1] = byte(hi48>>40), byte(hi48>>32)
	binary.BigEndian.PutUint32(e[2:6], uint32(hi48))
	binary.BigEndian.PutUint64(e[6:14], f.lo)
}

func (p *packedSet) has(f fingerprint) bool {
	if p == nil || p.n == 0 {
		return false
	}
	b := packedBucket(f)
	lo, hi := int(p.off[b]), int(p.off[b+1])
	want := f.hi & packedLowMask
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h, l := p.entry(m); h < want || (h == want && l < f.lo) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	found := false
	if lo < int(p.off[b+1]) {
		h, l := p.entry(lo)
		found = h == want && l == f.lo
	}
	runtime.KeepAlive(p.mem)
	return found
}

// merge adds the sorted, duplicate-free chunk c. It returns a fingerprint
// both hold, if any (the store is then not usable: the caller refuses the
// directory).
func (p *packedSet) merge(c []fingerprint) (dup fingerprint, found bool) {
	if len(c) == 0 {
		return fingerprint{}, false
	}
	if need := (p.n + len(c)) * packedEntry; need > len(p.mem.b) {
		// The manifest listed fewer records than the shards hold (adopted
		// shards, no manifest): grow by half again.
		r := newRegion(max(need, len(p.mem.b)+len(p.mem.b)/2))
		copy(r.b, p.mem.b[:p.n*packedEntry])
		p.mem = r
	}
	// The new offsets: each bucket starts after the chunk's keys of every
	// bucket before it.
	if p.next == nil {
		p.next = make([]uint32, packedBuckets+1)
	}
	clear(p.next)
	for _, f := range c {
		p.next[packedBucket(f)+1]++
	}
	var sum uint32
	for b := range packedBuckets + 1 {
		sum += p.next[b]
		p.next[b] = p.off[b] + sum
	}
	// From the back: the write position stays above the store's read
	// position until the chunk is used up, and then the rest is in place.
	i, j, w := p.n-1, len(c)-1, p.n+len(c)-1
	ib := packedBuckets - 1
	for j >= 0 {
		if i >= 0 {
			for int(p.off[ib]) > i {
				ib--
			}
			h, l := p.entry(i)
			s := fingerprint{hi: uint64(ib)<<48 | h, lo: l}
			switch cmpFP(s, c[j]) {
			case 0:
				runtime.KeepAlive(p.mem)
				return s, true
			case 1:
				p.put(w, s)
				i, w = i-1, w-1
				continue
			}
		}
		p.put(w, c[j])
		j, w = j-1, w-1
	}
	p.n += len(c)
	p.off, p.next = p.next, p.off
	runtime.KeepAlive(p.mem)
	return fingerprint{}, false
}
