// Package stamp holds the identity a job records of its dataset: each
// local file's size and hash (Content), every file's name and size when the
// job is split by file (Listing), and an output directory's job and final
// parts when a pass reads one (Output). Each has the Identity the job's
// hash covers and a String for messages; package dataset makes them
// (dataset.Stamp, List, StampOutput) and trusts them on resume.
package stamp

import (
	"fmt"
	"strings"
	"time"
)

// Content is the identity of a local dataset: each file's size and a hash
// of its bytes, in the order the files are read. Names are kept for people
// but are not part of the identity, so the same file given by a relative
// and by an absolute path (or moved) is the same dataset, and a file edited
// in place is another one.
type Content []File

// File is one file of a Content.
type File struct {
	Name  string `json:"name"` // base name, for messages; split by file, the name of dataset.FileNames
	Size  int64  `json:"size"`
	XXH64 string `json:"xxh64"` // hex xxHash64 of the file's bytes as stored (compressed or not)
	// What a later dataset.Stamp takes the hash on trust by, without reading the
	// file (dataset.Options.Known), and the rows counted on the way; none of it
	// is part of the identity.
	Path    string    `json:"path,omitempty"` // absolute, when stamped
	ModTime time.Time `json:"mod_time,omitzero"`
	Inode   uint64    `json:"inode,omitempty"`
	// ChangeTime is the file's status change time (ctime):
	// unlike the modification time, no user can set it back after an
	// in-place edit of the same size. A stamp recorded without one (an older
	// manifest) is not trusted: the file is hashed once more.
	ChangeTime time.Time `json:"change_time,omitzero"`
	Rows       int64     `json:"rows,omitempty"` // physical rows (JSONL, compressed or not; Parquet); 0: not counted
}

// Identity is what the job's hash covers: sizes and hashes in order.
func (c Content) Identity() string {
	var b strings.Builder
	for i, f := range c {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, "%d:%s", f.Size, f.XXH64)
	}
	return b.String()
}

// String names each file with its size and hash, for messages.
func (c Content) String() string {
	if len(c) == 0 {
		return "(not recorded)"
	}
	parts := make([]string, len(c))
	for i, f := range c {
		parts[i] = fmt.Sprintf("%s (%d bytes, xxh64 %s)", f.Name, f.Size, f.XXH64)
	}
	return strings.Join(parts, ", ")
}
