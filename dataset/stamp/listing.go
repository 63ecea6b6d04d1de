package stamp

import (
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// ListedFile is one file of a Listing.
type ListedFile struct {
	Name string `json:"name"` // as dataset.FileNames gives it
	Size int64  `json:"size"`
}

// Listing is every file of a local dataset split by file, by name and size,
// in sorted path order: the identity the shards of one job share (dataset.List).
// A shard's own files' bytes are its Content (dataset.Selection.ShardContent).
type Listing []ListedFile

// Identity is what the job's hash covers: every name and size, in order.
func (l Listing) Identity() string {
	var b strings.Builder
	for _, f := range l {
		fmt.Fprintf(&b, "%d:%s:%d;", len(f.Name), f.Name, f.Size)
	}
	return b.String()
}

// String sums the listing up for messages: the files, their bytes and a
// hash of the names and sizes (a listing of thousands of files is not
// spelled out).
func (l Listing) String() string {
	if len(l) == 0 {
		return "(not recorded)"
	}
	var size int64
	for _, f := range l {
		size += f.Size
	}
	return fmt.Sprintf("%d files, %d bytes, names and sizes xxh64 %016x (first %s, last %s)",
		len(l), size, xxhash.Sum64String(l.Identity()), l[0].Name, l[len(l)-1].Name)
}
