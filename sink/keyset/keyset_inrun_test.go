package keyset

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// stringID writes the i-th string id of the benchmarks into buf and returns
// it as a string sharing buf: the set keeps no id it is handed (it keeps
// a fingerprint or a bit), so the benchmark needs no allocation per key,
// and 10^7 ids need not be held at once.
func stringID(buf *[16]byte, i int) string {
	const hex = "0123456789abcdef"
	v := uint32(i) * 2654435761 // odd: distinct for distinct i below 2^32
	buf[0], buf[1] = 'q', '-'
	for j := range 8 {
		buf[2+j] = hex[v>>(28-4*j)&15]
	}
	return unsafe.String(&buf[0], 10)
}

// BenchmarkKeySetAdd measures adding string ids one at a time (what a run
// with an id column does with what it writes): per key, the fingerprint,
// the lookup that finds a key already held and the insert; "reserved"
// calls Reserve(n) first, as the sink does with the dataset's row count.
func BenchmarkKeySetAdd(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		for _, reserved := range []bool{false, true} {
			name := fmt.Sprint(n)
			if reserved {
				name += "/reserved"
			}
			b.Run(name, func(b *testing.B) { benchmarkKeySetAdd(b, n, reserved) })
		}
	}
}

func benchmarkKeySetAdd(b *testing.B, n int, reserved bool) {
	var buf [16]byte
	for b.Loop() {
		var s Set
		if reserved {
			s.Reserve(n)
		}
		for i := range n {
			if s.Add(Key{ID: stringID(&buf, i)}) {
				b.Fatalf("key %d reported as held", i)
			}
		}
		if s.Len() != n {
			b.Fatalf("Len = %d, want %d", s.Len(), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
}

// BenchmarkKeySetAddMemory measures what a set of 1,000,000 string ids
// added one at a time holds: the Go heap (runtime.MemStats after a GC), the
// packed region's entries (outside the heap; only pages written are
// resident) and, on Linux, the growth of the process's peak resident size
// over the fill (VmHWM, reset through /proc/self/clear_refs after the heap
// was handed back to the OS), which counts the garbage and any transient
// copy the fill made. "grown" lets the region grow as it fills (by mremap
// where the platform has it), "copied" grows it by copying as other
// platforms do, "reserved" calls Reserve(n) first.
func BenchmarkKeySetAddMemory(b *testing.B) {
	for _, mode := range []string{"grown", "copied", "reserved"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "copied" {
				saved := remapRegion
				remapRegion = nil
				b.Cleanup(func() { remapRegion = saved })
			}
			benchmarkKeySetAddMemory(b, mode == "reserved")
		})
	}
}

func benchmarkKeySetAddMemory(b *testing.B, reserved bool) {
	const n = 1_000_000
	var buf [16]byte
	for b.Loop() {
		heapBefore := heapAfterGC()
		debug.FreeOSMemory()
		rssBefore, peakOK := resetPeakRSS()
		var s Set
		if reserved {
			s.Reserve(n)
		}
		for i := range n {
			s.Add(Key{ID: stringID(&buf, i)})
		}
		peak, _ := peakRSS()
		heap := heapAfterGC()
		b.ReportMetric(float64(int64(heap)-int64(heapBefore))/n, "heap-bytes/key")
		b.ReportMetric(float64(s.offHeap())/n, "region-bytes/key")
		if peakOK {
			b.ReportMetric(float64(peak-rssBefore)/n, "peak-rss-bytes/key")
		}
		runtime.KeepAlive(&s)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// resetPeakRSS resets the process's peak resident size to its current one
// (Linux: writing 5 to /proc/self/clear_refs) and returns it in bytes; ok
// is false where that is not available.
func resetPeakRSS() (rss int64, ok bool) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, false
	}
	return procStatus("VmHWM:")
}

// peakRSS is the process's peak resident size in bytes (Linux).
func peakRSS() (int64, bool) { return procStatus("VmHWM:") }

func procStatus(field string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if rest, found := strings.CutPrefix(line, field); found {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// growthModes are the ways the packed store's region grows: by mremap
// (Linux), by copying into a new mapping (other unix systems; forced here
// by taking remapRegion away), and on the heap (where the kernel refuses
// the mapping). Each runs f with the set's hooks set for it.
func growthModes(t *testing.T, f func(t *testing.T, mode string, heap bool)) {
	t.Helper()
	mappable := false
	if b, err := mapRegion(1 << 16); err == nil {
		mappable = true
		_ = unmapRegion(b)
	}
	if remapRegion != nil && mappable {
		t.Run("mremap", func(t *testing.T) { f(t, "mremap", false) })
	}
	t.Run("mmap-copy", func(t *testing.T) {
		if !mappable {
			t.Skip("no mmap here (or the kernel refuses it): the heap mode covers the copy")
		}
		saved := remapRegion
		remapRegion = nil
		t.Cleanup(func() { remapRegion = saved })
		f(t, "copy", false)
	})
	t.Run("heap", func(t *testing.T) { f(t, "copy", true) })
}

// checkGrowth says whether the store grew the way mode says, more than
// once, and never the other way.
func checkGrowth(t *testing.T, p *packedSet, mode string) {
	t.Helper()
	if p == nil {
		t.Fatal("no packed store: the fingerprints never left the tail")
	}
	switch mode {
	case "mremap":
		if p.remaps < 2 || p.copies != 0 || !p.mem.state.mapped {
			t.Errorf("%d remaps, %d copies, mapped %v: want the mapping grown by mremap only, more than once", p.remaps, p.copies, p.mem.state.mapped)
		}
	case "copy":
		if p.copies < 2 || p.remaps != 0 {
			t.Errorf("%d remaps, %d copies: want the region grown by copying only, more than once", p.remaps, p.copies)
		}
	}
}

// Keys added one at a time through many merges of the tail into the
// packed store and several growths of its region, in each way it grows:
// Add reports a key held exactly when a map holds it (keys come back
// after they left the tail), Has answers as the map does for keys held
// and keys never added, and Len is the map's.
func TestKeySetAddMergesTailExactly(t *testing.T) {
	growthModes(t, func(t *testing.T, mode string, heap bool) {
		rng := rand.New(rand.NewPCG(7, 8))
		s := &Set{tailMin: 97, heapRegions: heap}
		want := map[Key]bool{}
		pool := mixedKeys(rng, 40_000)
		for step := range 100_000 {
			var k Key
			if step%3 == 0 && len(want) > 0 {
				k = pool[rng.IntN(min(len(pool), step+1))] // likely held already
			} else {
				k = pool[rng.IntN(len(pool))]
			}
			if got := s.Add(k); got != want[k] {
				t.Fatalf("step %d: Add(%v) = %v, want %v", step, k, got, want[k])
			}
			want[k] = true
			if step%5 == 0 {
				probe := mixedKeys(rng, 1)[0]
				if got := s.Has(probe); got != want[probe] {
					t.Fatalf("step %d: Has(%v) = %v, want %v", step, probe, got, want[probe])
				}
			}
		}
		if s.Len() != len(want) {
			t.Fatalf("Len = %d, want %d", s.Len(), len(want))
		}
		for _, k := range pool {
			if s.Has(k) != want[k] {
				t.Fatalf("Has(%v) = %v, want %v", k, s.Has(k), want[k])
			}
		}
		if limit := s.tailLimit(); len(s.tail) >= limit {
			t.Errorf("the tail holds %d fingerprints, its limit is %d", len(s.tail), limit)
		}
		checkGrowth(t, s.packed, mode)
		// Compact merges the tail; the set answers the same and takes
		// keys again afterwards.
		s.Compact()
		if s.tail != nil || s.scratch != nil {
			t.Errorf("Compact left a tail of %d or a scratch slice of %d", len(s.tail), cap(s.scratch))
		}
		for _, k := range pool {
			if s.Has(k) != want[k] {
				t.Fatalf("after Compact: Has(%v) = %v, want %v", k, s.Has(k), want[k])
			}
		}
		fresh := Key{ID: "after-compact"}
		if s.Add(fresh) || !s.Add(fresh) || !s.Has(fresh) || s.Len() != len(want)+1 {
			t.Error("the set does not take a key after Compact as before")
		}
	})
}

// A set loaded in bulk takes keys one at a time afterwards into the same
// packed store: a key loaded is reported held, a new one is not, and
// Reserve on it is harmless.
func TestKeySetAddAfterBulk(t *testing.T) {
	growthModes(t, func(t *testing.T, mode string, heap bool) {
		const n = 3 * packedChunkMin
		s := NewBulk(n)
		s.heapRegions = heap
		s.tailMin = 211
		for i := range n {
			s.AddBulk(Key{ID: fmt.Sprintf("b-%d", i)})
		}
		if _, dup := s.FinishBulk(); dup {
			t.Fatal("FinishBulk reported a duplicate of distinct keys")
		}
		s.Reserve(1000)
		for i := range 2 * n { // half of them loaded, half new
			k := Key{ID: fmt.Sprintf("b-%d", i/2+i%2*n)}
			if got, want := s.Add(k), i%2 == 0; got != want {
				t.Fatalf("Add(%v) = %v, want %v", k, got, want)
			}
		}
		if s.Len() != 2*n {
			t.Errorf("Len = %d, want %d", s.Len(), 2*n)
		}
		for i := range 2 * n {
			if !s.Has(Key{ID: fmt.Sprintf("b-%d", i)}) || s.Has(Key{ID: fmt.Sprintf("b-%d", i), Sample: 1}) {
				t.Fatalf("Has is wrong for b-%d", i)
			}
		}
		checkGrowth(t, s.packed, mode)
	})
}

// Reserve before the first key sizes the store so that a fill within the
// hint never grows it; on Linux, Reserve on a store that exists extends
// its mapping so that the keys after it need no growth either. A nil set,
// a zero or negative hint and a hint too large for any machine are
// harmless.
func TestKeySetReserve(t *testing.T) {
	const n = 100_000
	var nilSet *Set
	nilSet.Reserve(5)
	for _, hint := range []int{0, -3, 1 << 62} {
		var s Set
		s.Reserve(hint)
		s.Reserve(hint)
		for i := range 3 * packedChunkMin {
			if s.Add(Key{ID: fmt.Sprintf("r-%d", i)}) {
				t.Fatalf("Reserve(%d): a new key reported as held", hint)
			}
		}
		if !s.Has(Key{ID: "r-7"}) || s.Len() != 3*packedChunkMin {
			t.Fatalf("Reserve(%d): the set lost keys", hint)
		}
	}

	var s Set
	s.Reserve(n)
	for i := range n {
		s.Add(Key{ID: fmt.Sprintf("r-%d", i)})
		if i == packedChunkMin && (!s.packed.mem.state.mapped || len(s.packed.mem.b) < n*packedEntry) {
			t.Skipf("the kernel refused to map %d bytes (mapped %v): the store could not reserve", n*packedEntry, s.packed.mem.state.mapped)
		}
	}
	if s.packed.remaps != 0 || s.packed.copies != 0 {
		t.Errorf("a fill within Reserve's hint grew the store: %d remaps, %d copies", s.packed.remaps, s.packed.copies)
	}
	if remapRegion == nil {
		return
	}
	s.Reserve(n)
	if s.packed.remaps != 1 {
		t.Fatalf("Reserve on a full store made %d remaps, want 1", s.packed.remaps)
	}
	for i := n; i < 2*n; i++ {
		s.Add(Key{ID: fmt.Sprintf("r-%d", i)})
	}
	if s.packed.remaps != 1 || s.packed.copies != 0 {
		t.Errorf("keys within the second Reserve grew the store: %d remaps, %d copies", s.packed.remaps, s.packed.copies)
	}
	for i := range 2 * n {
		if !s.Has(Key{ID: fmt.Sprintf("r-%d", i)}) {
			t.Fatalf("Has(r-%d) = false", i)
		}
	}
}
