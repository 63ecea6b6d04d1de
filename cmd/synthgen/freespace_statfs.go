//go:build linux || darwin || freebsd

package main

import "syscall"

// freeSpace is the space an unprivileged writer has left on the
// filesystem holding dir.
func freeSpace(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
