//go:build unix

package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockName is the lock file inside the output directory. Two processes
// appending to one directory would each skip only what they saw at start and
// write the same keys twice, so Open takes an exclusive flock on it. The
// kernel drops the lock when the process dies, so a crash never leaves the
// directory locked.
const LockName = ".lock"

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock output dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("output dir %s is in use by another synthgen run (%s is locked)", dir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
