//go:build !unix

package sink

// Holder says whether a live run holds dir: on systems without flock no
// lock is taken (lock_other.go), so none is ever found.
func Holder(dir string) (held bool, pid int, host string, err error) {
	return false, 0, "", nil
}
