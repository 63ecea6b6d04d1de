//go:build unix

package view

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// newBlock maps a block of anonymous memory (resident only as its pages
// are written), or allocates it on the heap where the kernel refuses.
func newBlock() (*block, func()) {
	b, err := unix.Mmap(-1, 0, blockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return new(block), func() {}
	}
	return (*block)(unsafe.Pointer(&b[0])), func() { _ = unix.Munmap(b) }
}
