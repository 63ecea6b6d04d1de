//go:build !unix

package sink

// allocRegion is a plain slice where mmap is not available.
func allocRegion(size int) (b []byte, mapped bool) { return make([]byte, size), false }

func freeRegion([]byte, bool) {}
