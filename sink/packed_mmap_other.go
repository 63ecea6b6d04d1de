//go:build !unix

package sink

// allocRegion is a plain slice where mmap is not available.
func allocRegion(size int) []byte { return make([]byte, size) }

func freeRegion([]byte) {}
