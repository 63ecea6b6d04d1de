//go:build darwin || freebsd || netbsd

package dataset

import (
	"os"
	"syscall"
	"time"
)

// changeTime is the file's status change time (st_ctime): see ctime_linux.go.
func changeTime(st os.FileInfo) time.Time {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return time.Unix(s.Ctimespec.Unix())
	}
	return time.Time{}
}
