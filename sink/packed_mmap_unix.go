//go:build unix

package sink

import (
	"fmt"
	"syscall"
)

// allocRegion maps size bytes of anonymous memory: outside the Go heap, and
// resident only where written.
func allocRegion(size int) []byte {
	size = max(size, 1)
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// Out of address space or memory: as make would, fail loudly.
		panic(fmt.Sprintf("sink: mmap of %d bytes for the key set: %v", size, err))
	}
	return b
}

func freeRegion(b []byte) { _ = syscall.Munmap(b) }
