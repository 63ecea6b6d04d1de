//go:build unix

package hidden

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockedByOther reports whether another process (or descriptor) holds an
// exclusive flock on f: the server's writer does while it writes.
func lockedByOther(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		return false, unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// Free is the space left to an unprivileged writer on dir's filesystem.
func Free(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
