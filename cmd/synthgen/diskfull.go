package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// diskError turns a write of the output that the disk refused (full, over
// quota, failing) into what a person can act on: the file, the free space
// left on the output directory's filesystem, and how to resume. It is nil
// for any other error. What was fsynced before stays; the next run
// recovers the rest and asks only what is missing.
func diskError(dir string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return nil
	}
	todo := "free space, then run the same command to resume"
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT:
	case syscall.EIO:
		todo = "check the disk (dmesg), then run the same command to resume"
	default:
		return nil
	}
	path := dir
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		path = pe.Path
	}
	free := "unknown space"
	if n, ok := freeSpace(dir); ok {
		free = formatSize(n)
	}
	return &exitError{code: exitFailure, err: &diskFullError{
		msg: fmt.Sprintf("%v writing %s: %s free on the filesystem of %s; %s", errno, path, free, dir, todo),
		err: err,
	}}
}

// diskFullError says a refused write in a person's words and unwraps to
// the error the sink returned (errors.Is(err, syscall.ENOSPC) holds).
type diskFullError struct {
	msg string
	err error
}

func (e *diskFullError) Error() string { return e.msg }
func (e *diskFullError) Unwrap() error { return e.err }

// formatSize is n bytes in binary units: "0 B", "812 KiB", "1.4 GiB".
func formatSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v >= 10 {
		return fmt.Sprintf("%.0f %ciB", v, "KMGTPE"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp])
}
