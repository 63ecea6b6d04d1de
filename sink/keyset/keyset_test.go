package keyset

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// mixedKeys are keys of every kind the set stores differently: dense row
// indices, sparse decimal ids far beyond any bitmap, ids with a leading
// zero or a sign (strings that look like numbers), and plain strings, over
// three samples.
func mixedKeys(rng *rand.Rand, n int) []Key {
	keys := make([]Key, 0, n)
	for i := range n {
		var id string
		switch rng.IntN(6) {
		case 0, 1:
			id = strconv.Itoa(rng.IntN(3 * n))
		case 2:
			id = strconv.FormatUint(rng.Uint64N(1<<50), 10)
		case 3:
			id = "0" + strconv.Itoa(rng.IntN(n))
		case 4:
			id = "-" + strconv.Itoa(rng.IntN(n))
		default:
			id = fmt.Sprintf("q-%x-%d", rng.Uint32(), i%7)
		}
		keys = append(keys, Key{ID: id, Sample: rng.IntN(3)})
	}
	return keys
}

// The set answers as a map does, whichever way keys came in, before and
// after Compact.
func TestKeySetAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := mixedKeys(rng, 20000)
	want := map[Key]bool{}
	var inc Set
	for _, k := range keys {
		if had := inc.Add(k); had != want[k] {
			t.Fatalf("Add(%v) = %v, want %v", k, had, want[k])
		}
		want[k] = true
	}
	bulk := NewBulk(1000) // a small hint: many decimal ids land beyond the bitmaps
	for k := range want {
		if bulk.AddBulk(k) {
			t.Fatalf("AddBulk(%v) reported a duplicate", k)
		}
	}
	if _, dup := bulk.FinishBulk(); dup {
		t.Fatal("FinishBulk reported a duplicate of distinct keys")
	}
	probes := append(mixedKeys(rng, 20000), keys...)
	check := func(name string, s *Set) {
		t.Helper()
		if s.Len() != len(want) {
			t.Errorf("%s: Len = %d, want %d", name, s.Len(), len(want))
		}
		for _, k := range probes {
			if got := s.Has(k); got != want[k] {
				t.Fatalf("%s: Has(%v) = %v, want %v", name, k, got, want[k])
			}
		}
	}
	check("incremental", &inc)
	check("bulk", bulk)
	inc.Compact()
	check("incremental, compacted", &inc)
}

// A decimal id that went to the fingerprints while its bitmap was sparse is
// still found when the bitmap later reaches it, and not added twice.
func TestKeySetDecimalIDInBothPlaces(t *testing.T) {
	var s Set
	far := Key{ID: "2000000", Sample: 0}
	if s.Add(far) {
		t.Fatal("first Add reported the key as held")
	}
	for i := range 2_000_001 / 64 * 64 { // the bitmap grows up to far's word
		s.Add(Key{ID: strconv.Itoa(i), Sample: 0})
	}
	if !s.Add(far) {
		t.Error("the key held as a fingerprint was added again once the bitmap reached it")
	}
	if !s.Has(far) {
		t.Error("Has misses the key")
	}
}

// The rows of a second half (a run that completes a job from 50%), in
// completion order (shuffled within a window, as 200 requests in flight
// finish), ascending or descending, are bits of a bitmap that starts at
// the first of them, not fingerprints: the set stays a bit a key, and
// answers as a map does.
func TestKeySetSecondHalfIsBits(t *testing.T) {
	const lo, hi = 500_000, 1_000_000
	for _, order := range []string{"ascending", "descending"} {
		t.Run(order, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			ids := make([]int, 0, hi-lo)
			for i := lo; i < hi; i++ {
				ids = append(ids, i)
			}
			if order == "descending" {
				slices.Reverse(ids)
			}
			for i := 0; i+200 <= len(ids); i += 200 {
				w := ids[i : i+200]
				rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
			}
			var s Set
			for _, i := range ids {
				if s.Add(Key{ID: strconv.Itoa(i)}) {
					t.Fatalf("Add(%d) reported the key as held", i)
				}
			}
			if s.packed != nil || len(s.tail) != 0 {
				t.Fatalf("a packed store (%v) or %d tail fingerprints: the keys should all be bits", s.packed != nil, len(s.tail))
			}
			if words := len(s.bits[0].words); words > 2*(hi-lo)/64 {
				t.Errorf("the bitmap has %d words for %d keys", words, hi-lo)
			}
			for _, i := range []int{0, lo - 1, lo, lo + 12345, hi - 1, hi, 2 * hi} {
				if got, want := s.Has(Key{ID: strconv.Itoa(i)}), i >= lo && i < hi; got != want {
					t.Errorf("Has(%d) = %v, want %v", i, got, want)
				}
			}
			if s.Len() != hi-lo || !s.Add(Key{ID: strconv.Itoa(lo)}) {
				t.Errorf("Len = %d, want %d; or a held key was added again", s.Len(), hi-lo)
			}
		})
	}
}

func TestKeySetBulkFindsDuplicates(t *testing.T) {
	s := NewBulk(10)
	if s.AddBulk(Key{ID: "7", Sample: 1}) || !s.AddBulk(Key{ID: "7", Sample: 1}) {
		t.Error("a row-index key twice is not reported at once")
	}
	s = NewBulk(10)
	s.AddBulk(Key{ID: "a", Sample: 0})
	s.AddBulk(Key{ID: "b", Sample: 0})
	s.AddBulk(Key{ID: "a", Sample: 0})
	f, dup := s.FinishBulk()
	if !dup || f != FingerprintOf(Key{ID: "a", Sample: 0}) {
		t.Errorf("FinishBulk = %v, %v: want the fingerprint of a", f, dup)
	}
	s = NewBulk(10)
	s.AddBulk(Key{ID: "a", Sample: 0})
	s.AddBulk(Key{ID: "a", Sample: 1})
	if _, dup := s.FinishBulk(); dup {
		t.Error("one id with two samples is two keys")
	}
}

// BenchmarkKeySetBytesPerKey measures the memory a frozen set of a million
// keys holds: the heap (runtime.MemStats after a GC) plus the bytes of the
// packed store's region written (outside the heap, packed.go), for
// row-index ids and for string ids, loaded in bulk and added one at a time,
// against a map of the same keys.
func BenchmarkKeySetBytesPerKey(b *testing.B) {
	const n = 1_000_000
	ids := map[string]func(i int) string{
		"row-index": strconv.Itoa,
		"string":    func(i int) string { return fmt.Sprintf("q-%08x", uint32(i)*2654435761) },
	}
	for _, kind := range []string{"row-index", "string"} {
		id := ids[kind]
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		b.Run(kind+"/bulk", func(b *testing.B) {
			for b.Loop() {
				before := heap()
				s := NewBulk(n)
				for i := range n {
					s.AddBulk(Key{ID: id(i)})
				}
				s.FinishBulk()
				b.ReportMetric(float64(heap()-before+s.offHeap())/n, "bytes/key")
				runtime.KeepAlive(s)
			}
		})
		b.Run(kind+"/add", func(b *testing.B) {
			for b.Loop() {
				before := heap()
				var s Set
				for i := range n {
					s.Add(Key{ID: id(i)})
				}
				s.Compact()
				b.ReportMetric(float64(heap()-before+s.offHeap())/n, "bytes/key")
				runtime.KeepAlive(&s)
			}
		})
		b.Run(kind+"/map", func(b *testing.B) {
			for b.Loop() {
				before := heap()
				m := make(map[Key]int32)
				for i := range n {
					m[Key{ID: id(i)}] = 0
				}
				b.ReportMetric(float64(heap()-before)/n, "bytes/key")
				runtime.KeepAlive(m)
			}
		})
	}
}
