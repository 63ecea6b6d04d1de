//go:build !unix

package view

// newBlock allocates a block on the heap where there is no mmap.
func newBlock() (*block, func()) { return new(block), func() {} }
