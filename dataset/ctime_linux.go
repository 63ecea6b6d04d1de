package dataset

import (
	"os"
	"syscall"
	"time"
)

// changeTime is the file's status change time (st_ctime): the kernel sets
// it to now on every write, chmod or utime, and no call sets it back, so
// that an edit whose modification time was restored (touch -r) still
// shows. Zero when the system does not say.
func changeTime(st os.FileInfo) time.Time {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return time.Unix(s.Ctim.Unix())
	}
	return time.Time{}
}
