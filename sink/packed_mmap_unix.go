//go:build unix

package sink

import (
	"syscall"
)

// allocRegion maps size bytes of anonymous memory: outside the Go heap, and
// resident only where written. Where the kernel refuses the mapping (strict
// overcommit, a ulimit on address space) the region is a plain slice on the
// heap instead: the same keys, only counted by the collector (mapped false).
func allocRegion(size int) (b []byte, mapped bool) {
	size = max(size, 1)
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, size), false
	}
	return b, true
}

func freeRegion(b []byte, mapped bool) {
	if mapped {
		_ = syscall.Munmap(b)
	}
}
