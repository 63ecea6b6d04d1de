package keyset

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The packed store answers as a map does across many merges, region
// growth (a hint far below the keys) in each way a region grows (mremap,
// a copy into a new mapping, a copy on the heap), crafted fingerprints at
// the edges of buckets (top bits all zero, all one, many in one bucket)
// and absent fingerprints one bit away from present ones.
func TestPackedSetAgreesWithMap(t *testing.T) {
	growthModes(t, testPackedSetAgreesWithMap)
}

func testPackedSetAgreesWithMap(t *testing.T, mode string, heap bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := newPackedSet(10, 10, heap)
	want := map[Fingerprint]bool{}
	var all []Fingerprint
	add := func(c []Fingerprint) {
		t.Helper()
		slices.SortFunc(c, cmpFP)
		c = slices.Compact(c)
		var fresh []Fingerprint
		for _, f := range c {
			if !want[f] {
				fresh = append(fresh, f)
			}
		}
		if _, dup := p.merge(fresh); dup {
			t.Fatal("merge reported a duplicate of fresh fingerprints")
		}
		for _, f := range fresh {
			want[f] = true
			all = append(all, f)
		}
	}
	for round := range 12 {
		c := make([]Fingerprint, 0, 16000)
		for range 16000 {
			c = append(c, Fingerprint{hi: rng.Uint64(), lo: rng.Uint64()})
		}
		for i := range 50 { // edges and one crowded bucket
			c = append(c,
				Fingerprint{hi: uint64(i), lo: uint64(round) << 16},
				Fingerprint{hi: ^uint64(0) - uint64(i), lo: ^(uint64(round) << 16)},
				Fingerprint{hi: 0x1234<<48 | uint64(round*50+i), lo: rng.Uint64()})
		}
		add(c)
	}
	if p.n != len(want) {
		t.Fatalf("n = %d, want %d", p.n, len(want))
	}
	for _, f := range all {
		if !p.has(f) {
			t.Fatalf("has(%x) = false for a fingerprint merged", f)
		}
		for _, g := range []Fingerprint{{f.hi, f.lo ^ 1<<16}, {f.hi, f.lo ^ 1<<63}, {f.hi ^ 1, f.lo}, {f.hi ^ 1<<48, f.lo}, {f.hi ^ 1<<63, f.lo}} {
			if p.has(g) != want[g] {
				t.Fatalf("has(%x) = %v, want %v", g, p.has(g), want[g])
			}
		}
		// lo's low 16 bits are not kept (112 bits tell keys apart).
		if g := (Fingerprint{f.hi, f.lo ^ 0xffff}); !p.has(g) {
			t.Fatalf("has(%x) = false: the store should not see lo's low 16 bits", g)
		}
	}
	checkGrowth(t, p, mode)
}

// A key twice is found whether both copies fall in one chunk or in two
// (one already merged into the store), and one key with two samples is
// two keys.
func TestKeySetBulkDuplicateAcrossChunks(t *testing.T) {
	n := 3 * packedChunkMin
	for _, at := range []int{10, n - 1} { // the second copy: same chunk, a later one
		s := NewBulk(n)
		for i := range n {
			s.AddBulk(Key{ID: fmt.Sprintf("k-%d", i)})
			if i == at {
				s.AddBulk(Key{ID: "k-3"})
			}
		}
		s.AddBulk(Key{ID: "k-3", Sample: 1})
		f, dup := s.FinishBulk()
		if !dup || f != FingerprintOf(Key{ID: "k-3"}) {
			t.Errorf("second copy after key %d: FinishBulk = %x, %v: want the fingerprint of k-3", at, f, dup)
		}
	}
	s := NewBulk(n)
	for i := range n {
		s.AddBulk(Key{ID: fmt.Sprintf("k-%d", i)})
		s.AddBulk(Key{ID: fmt.Sprintf("k-%d", i), Sample: 1})
	}
	if _, dup := s.FinishBulk(); dup {
		t.Fatal("distinct keys reported as a duplicate")
	}
	for i := range n {
		if !s.Has(Key{ID: fmt.Sprintf("k-%d", i), Sample: 1}) || s.Has(Key{ID: fmt.Sprintf("k-%d", i), Sample: 2}) {
			t.Fatalf("Has is wrong for k-%d", i)
		}
	}
	if s.Len() != 2*n {
		t.Errorf("Len = %d, want %d", s.Len(), 2*n)
	}
}

// offHeap is the bytes of the set's packed region written: its entries
// (what is resident of it, to a page).
func (s *Set) offHeap() uint64 {
	if s.packed == nil {
		return 0
	}
	return uint64(s.packed.n * packedEntry)
}

// BenchmarkKeySetBulkLoad measures loading string ids in bulk (what Open
// does with an id column), per key: the fingerprint, the chunk's sort and
// the merges into the packed store.
func BenchmarkKeySetBulkLoad(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				s := NewBulk(n)
				for i := range n {
					s.AddBulk(Key{ID: fmt.Sprintf("q-%08x", uint32(i)*2654435761)})
				}
				if _, dup := s.FinishBulk(); dup {
					b.Fatal("a duplicate among distinct keys")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// search finds the first entry not below a target as a linear scan does,
// whatever the spread of a bucket's entries (the interpolation guesses
// well only for an even one), for targets present, absent, below and
// above every entry, and for a range cut short of the bucket's end (as a
// merge searches).
func TestPackedSearchAnySpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const bucket = 7
	spreads := map[string]func(i int) uint64{
		"even":      func(int) uint64 { return rng.Uint64N(1 << 48) },
		"low":       func(int) uint64 { return rng.Uint64N(1000) },
		"high":      func(int) uint64 { return 1<<48 - 1 - rng.Uint64N(1000) },
		"clustered": func(i int) uint64 { return uint64(i%3)<<46 + rng.Uint64N(64) },
		"one hi48":  func(int) uint64 { return 1 << 40 }, // entries differ in lo48 only
	}
	for name, spread := range spreads {
		t.Run(name, func(t *testing.T) {
			for _, size := range []int{1, 2, 9, 10, 300} {
				p := newPackedSet(0, 0, false)
				c := make([]Fingerprint, 0, size)
				for i := range size {
					c = append(c, Fingerprint{hi: bucket<<48 | spread(i), lo: rng.Uint64() &^ 0xffff})
				}
				slices.SortFunc(c, cmpFP)
				c = slices.CompactFunc(c, samePacked)
				if _, dup := p.merge(c); dup {
					t.Fatal("merge reported a duplicate")
				}
				lo, end := int(p.off[bucket]), int(p.off[bucket+1])
				var targets [][2]uint64
				for i := lo; i < end; i++ {
					h, l := p.entry(i)
					targets = append(targets, [2]uint64{h, l}, [2]uint64{h, l + 1}, [2]uint64{h, l - 1})
				}
				targets = append(targets, [2]uint64{0, 0}, [2]uint64{1<<48 - 1, 1<<48 - 1})
				for range 50 {
					targets = append(targets, [2]uint64{spread(0), rng.Uint64N(1 << 48)})
				}
				for _, tg := range targets {
					for hi := lo; hi <= end; hi += max(1, (end-lo)/7) {
						want := lo
						for want < hi {
							if h, l := p.entry(want); h > tg[0] || (h == tg[0] && l >= tg[1]) {
								break
							}
							want++
						}
						if got := p.search(lo, hi, end, tg[0], tg[1]); got != want {
							t.Fatalf("%d entries: search(%d, %d, %d, %x, %x) = %d, want %d", size, lo, hi, end, tg[0], tg[1], got, want)
						}
					}
				}
			}
		})
	}
}
