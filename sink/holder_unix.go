//go:build unix

package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Holder says whether a live run holds the output directory dir (its
// flock on DIR/.lock) and, when it wrote itself there, its pid and host.
// It asks with a shared lock taken and dropped at once, so it holds
// nothing once it returns; a directory without a lock file is held by
// nobody. A run that starts in that instant is refused as if the
// directory were in use, and says so.
func Holder(dir string) (held bool, pid int, host string, err error) {
	path := filepath.Join(dir, LockName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, "", nil
	}
	if err != nil {
		return false, 0, "", fmt.Errorf("read lock %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return false, 0, "", fmt.Errorf("lock %s: %w", path, err)
		}
		if h, ok := readHolder(f); ok {
			return true, h.PID, h.Hostname, nil
		}
		return true, 0, "", nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, 0, "", nil
}
