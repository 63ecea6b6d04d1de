package dataset

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Content is the identity of a local dataset: each file's size and a hash
// of its bytes, in the order the files are read. Names are kept for people
// but are not part of the identity, so the same file given by a relative
// and by an absolute path (or moved) is the same dataset, and a file edited
// in place is another one.
type Content []FileStamp

// FileStamp is one file of a Content.
type FileStamp struct {
	Name  string `json:"name"` // base name, for messages
	Size  int64  `json:"size"`
	XXH64 string `json:"xxh64"` // hex xxHash64 of the file's bytes as stored (compressed or not)
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

// Stamp reads the files of a local dataset and returns their Content. A
// hash of every byte is cheap next to the job (about a second per GB read
// from the page cache, see the dataset benchmarks) and is the only
// identity an in-place edit cannot slip past. An hf:// dataset has no
// Content: its pinned revision (Pin) already names its bytes, and its files
// are verified against the Hub's hashes when they are downloaded.
func Stamp(opts Options) (Content, error) {
	if isHubPath(opts.Path) || isOutputDir(opts.Path) {
		return nil, nil // an output directory's identity is its OutputStamp
	}
	files, err := resolve(opts.Path)
	if err != nil {
		return nil, err
	}
	c := make(Content, 0, len(files))
	buf := make([]byte, readBufSize)
	for _, path := range files {
		st, err := stampFile(path, buf)
		if err != nil {
			return nil, err
		}
		c = append(c, st)
	}
	return c, nil
}

func stampFile(path string, buf []byte) (FileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileStamp{}, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return FileStamp{}, fmt.Errorf("dataset: %w", err)
	}
	h := xxhash.New()
	var w io.Writer = h
	var rows *lineCounter
	var headLen int64
	if kind, comp, err := fileType(path); err == nil && kind == kindJSONL && comp == "" {
		// Count the rows on the way, for Count (rowcount.go); a byte
		// order mark is no part of the first line, as skipBOM says.
		rows = &lineCounter{}
		head := buf[:min(3, len(buf))]
		k, err := io.ReadFull(f, head)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return FileStamp{}, fmt.Errorf("dataset %s: read: %w", path, err)
		}
		head, headLen = head[:k], int64(k)
		h.Write(head)
		if !bytes.Equal(head, []byte{0xEF, 0xBB, 0xBF}) {
			rows.Write(head)
		}
		w = io.MultiWriter(h, rows)
	}
	n, err := io.CopyBuffer(w, f, buf)
	if err != nil {
		return FileStamp{}, fmt.Errorf("dataset %s: read: %w", path, err)
	}
	n += headLen
	if rows != nil {
		if n == st.Size() {
			rememberRows(path, st, rows.total())
		}
	}
	return FileStamp{Name: filepath.Base(path), Size: n, XXH64: fmt.Sprintf("%016x", h.Sum64())}, nil
}
