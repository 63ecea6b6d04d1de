//go:build unix

package export

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes d's flock: exclusive without waiting (errLockBusy when
// another process holds it), or shared, waiting for an exclusive holder to
// finish. Taking the shared lock while holding the exclusive one converts
// it.
func lockDir(d *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(d.Fd()), how)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLockBusy
		}
		return err
	}
}
