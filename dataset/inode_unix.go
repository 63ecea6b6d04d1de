//go:build unix

package dataset

import (
	"os"
	"syscall"
)

// inode is the file's inode number, one of what a stamp is trusted by.
func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Ino)
	}
	return 0
}
