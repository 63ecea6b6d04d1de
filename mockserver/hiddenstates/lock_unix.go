//go:build unix

package hiddenstates

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockExclusive takes the flock the connector holds while it writes.
func lockExclusive(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) }
