package dataset

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/synthgen/synthgen/dataset/stamp"
)

// Stamp reads the files of a local dataset that the selection reads (split
// by file, the shard's own) and returns their Content. A hash of every byte
// is cheap next to the job (about a second per GB read from the page
// cache, see the dataset benchmarks) and is the only identity an in-place
// edit cannot slip past. An hf:// dataset has no Content: its pinned
// revision (Pin) already names its bytes, and its files are verified
// against the Hub's hashes when they are downloaded.
//
// A file that Options.Known stamped before, and that has the path, size,
// modification time, inode and change time it had then, is not read again: its hash and
// row count are taken from there (the rule by which a resume trusts a
// part's key summary). A resume of hundreds of GB that did not change thus
// starts without reading them; Known empty (--rehash) reads every byte.
func Stamp(opts Options) (stamp.Content, error) {
	if isHubPath(opts.Path) || isOutputDir(opts) {
		return nil, nil // an output directory's identity is its stamp.Output
	}
	if err := opts.Shard.check(); err != nil {
		return nil, err
	}
	files, _, err := opts.selectFiles()
	if err != nil {
		return nil, err
	}
	known := map[string]stamp.File{}
	for _, k := range opts.Known {
		if k.Path != "" && k.XXH64 != "" {
			known[k.Path] = k
		}
	}
	c := make(stamp.Content, 0, len(files))
	var buf []byte
	for _, f := range files {
		name := filepath.Base(f.path)
		if opts.ByFile() {
			name = f.name
		}
		if k, ok := trusted(f.path, known); ok {
			k.Name = name
			c = append(c, k)
			continue
		}
		if buf == nil {
			buf = make([]byte, readBufSize)
		}
		st, err := stampFile(f.path, buf)
		if err != nil {
			return nil, err
		}
		st.Name = name
		c = append(c, st)
	}
	return c, nil
}

// trusted is the stamp known has for the file at path, when the file has
// the path, size, modification time, inode and change time it had then;
// its rows are remembered for Count.
//
// This is what git's index (with core.trustctime, its default) and restic
// trust a file by; rsync and make trust size and modification time alone,
// which an in-place edit followed by touch -r slips past. The change time
// moves on every write, chmod and utime and cannot be set back, so only
// an edit within the clock tick of the stamp's own read (git's "racily
// clean" case) or a change made with the clock set back is missed:
// --rehash (Known empty) reads every byte.
func trusted(path string, known map[string]stamp.File) (stamp.File, bool) {
	if len(known) == 0 {
		return stamp.File{}, false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return stamp.File{}, false
	}
	k, ok := known[abs]
	if !ok {
		return stamp.File{}, false
	}
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() != k.Size || !st.ModTime().Equal(k.ModTime) || inode(st) != k.Inode ||
		!changeTime(st).Equal(k.ChangeTime) {
		return stamp.File{}, false
	}
	if k.Rows > 0 {
		rememberRows(path, st, k.Rows)
	}
	return k, true
}

func stampFile(path string, buf []byte) (stamp.File, error) {
	f, err := openFile(path)
	if err != nil {
		return stamp.File{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return stamp.File{}, fmt.Errorf("dataset: %w", err)
	}
	h := xxhash.New()
	var w io.Writer = h
	var rows *lineCounter
	var headLen int64
	kind, comp, kerr := fileType(path)
	if kerr == nil && kind == kindJSONL && comp == "" {
		// Count the rows on the way, for Count (rowcount.go); a byte
		// order mark is no part of the first line, as skipBOM says.
		rows = &lineCounter{}
		head := buf[:min(3, len(buf))]
		k, err := io.ReadFull(f, head)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return stamp.File{}, fmt.Errorf("dataset %s: read: %w", path, err)
		}
		head, headLen = head[:k], int64(k)
		h.Write(head)
		if !bytes.Equal(head, []byte{0xEF, 0xBB, 0xBF}) {
			rows.Write(head)
		}
		w = io.MultiWriter(h, rows)
	}
	var n int64
	counted := int64(-1) // not counted
	if kerr == nil && kind == kindJSONL && comp != "" {
		// A compressed file: its bytes hashed as stored, its rows counted
		// in the decompressed stream on the same read.
		n, counted, err = hashAndCount(f, h, comp, buf)
	} else {
		n, err = io.CopyBuffer(w, f, buf)
	}
	if err != nil {
		return stamp.File{}, fmt.Errorf("dataset %s: read: %w", path, err)
	}
	n += headLen
	if rows != nil {
		counted = rows.total()
	}
	if kerr == nil && kind == kindParquet && n == st.Size() {
		// The footer's count: a few KB, in the page cache just read.
		if pf, pp, err := openParquetFile(path); err == nil {
			counted = pp.NumRows()
			pf.Close()
		}
	}
	fs := stamp.File{Size: n, XXH64: fmt.Sprintf("%016x", h.Sum64())}
	if n == st.Size() {
		if abs, err := filepath.Abs(path); err == nil {
			fs.Path, fs.ModTime, fs.Inode, fs.ChangeTime = abs, st.ModTime(), inode(st), changeTime(st)
		}
		if counted >= 0 {
			rememberRows(path, st, counted)
		}
		fs.Rows = max(counted, 0)
	}
	return fs, nil
}

// hashAndCount hashes every byte of a compressed JSONL file into h and
// counts the rows of its decompressed stream; a stream that does not
// decompress leaves the rows uncounted (-1: Count and Open report it).
func hashAndCount(f io.Reader, h io.Writer, comp string, buf []byte) (n int64, rows int64, err error) {
	rows = -1
	cr := &countingReader{r: io.TeeReader(f, h)}
	br := bufio.NewReaderSize(cr, readBufSize)
	var zr io.Reader
	switch comp {
	case ".gz":
		if g, gerr := gzip.NewReader(br); gerr == nil {
			defer g.Close()
			zr = g
		}
	case ".zst":
		if z, zerr := zstd.NewReader(br, zstd.WithDecoderConcurrency(1)); zerr == nil {
			defer z.Close()
			zr = z
		}
	}
	if zr != nil {
		lr := bufio.NewReaderSize(zr, readBufSize)
		lc := &lineCounter{}
		if skipBOM(lr) == nil {
			if _, derr := io.CopyBuffer(lc, lr, buf); derr == nil {
				rows = lc.total()
			}
		}
	}
	if cr.err != nil {
		return cr.n, -1, cr.err
	}
	// What the decompressor left (trailing bytes, a stream cut short) is
	// hashed too.
	if _, err := io.CopyBuffer(io.Discard, br, buf); err != nil {
		return cr.n, -1, err
	}
	return cr.n, rows, cr.err
}

// countingReader counts the bytes read through it and keeps its first read
// error, so that a failed read is not taken for a corrupt stream.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}
