//go:build !linux && !darwin && !freebsd && !netbsd

package dataset

import (
	"os"
	"time"
)

// changeTime is zero where this package does not read a change time
// (Windows has none in os.FileInfo): a stamp is then trusted by path, size,
// modification time and inode, and --rehash is the way past an edit that
// restored its modification time.
func changeTime(os.FileInfo) time.Time { return time.Time{} }
