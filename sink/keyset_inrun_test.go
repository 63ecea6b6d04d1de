package sink

import (
	"fmt"
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
// the lookup that finds a key already held and the insert.
func BenchmarkKeySetAdd(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var buf [16]byte
			for b.Loop() {
				var s KeySet
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
		})
	}
}

// BenchmarkKeySetAddMemory measures what a set of 1,000,000 string ids
// added one at a time holds: the Go heap (runtime.MemStats after a GC), the
// packed region's entries (outside the heap; only pages written are
// resident) and, on Linux, the growth of the process's peak resident size
// over the fill (VmHWM, reset through /proc/self/clear_refs after the heap
// was handed back to the OS), which counts the garbage and any transient
// copy the fill made.
func BenchmarkKeySetAddMemory(b *testing.B) {
	const n = 1_000_000
	var buf [16]byte
	for b.Loop() {
		heapBefore := heapAfterGC()
		debug.FreeOSMemory()
		rssBefore, peakOK := resetPeakRSS()
		var s KeySet
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
