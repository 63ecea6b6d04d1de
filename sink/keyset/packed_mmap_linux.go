package keyset

import "golang.org/x/sys/unix"

// On Linux a region grows by mremap(MREMAP_MAYMOVE): the kernel extends
// the mapping in place or moves its pages to a larger range, so the
// entries are neither copied nor resident twice while the store grows.
func init() {
	remapRegion = func(b []byte, size int) ([]byte, error) {
		return unix.Mremap(b, size, unix.MREMAP_MAYMOVE)
	}
}
