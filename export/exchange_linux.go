package export

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchange swaps the names a and b in one step. errors.ErrUnsupported:
// the kernel or the filesystem cannot (putInPlace then renames twice).
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errors.ErrUnsupported
	}
	return err
}
