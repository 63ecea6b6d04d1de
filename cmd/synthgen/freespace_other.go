//go:build !(linux || darwin || freebsd)

package main

// freeSpace is unknown where syscall has no Statfs.
func freeSpace(string) (uint64, bool) { return 0, false }
