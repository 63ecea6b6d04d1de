//go:build unix

package keyset

import "golang.org/x/sys/unix"

// mapRegion maps size bytes of anonymous memory: outside the Go heap, and
// resident only where written. It goes through x/sys/unix, whose Mremap
// (packed_mmap_linux.go) resizes only mappings made by its Mmap.
func mapRegion(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

func unmapRegion(b []byte) error { return unix.Munmap(b) }
