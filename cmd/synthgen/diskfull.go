package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/dustin/go-humanize"
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
		free = humanize.IBytes(n)
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
