package dataset

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/synthgen/synthgen/internal/readcount"
)

// A row is one decoded dataset row: JSON objects decode into it with
// json.Number for numbers, Parquet rows with int64/float64, and both give
// lists as []any and structs as map[string]any; package dataset/shape makes
// the prompt of it, whatever the file.
type row = map[string]any

// source reads the physical rows of one file in order.
type source interface {
	// next reads the next physical row; io.EOF at the end of the file. When
	// decode is false the row is only counted (it belongs to another shard),
	// so r is nil. A row that is there but cannot be decoded (invalid JSON, a
	// line over the limit) is reported in bad; err is for failures that end
	// the file (I/O, a corrupt stream). When decode is true and skip is
	// not nil, skip is asked first with the row's raw bytes (a JSON line;
	// nil where the source has none): true means the row is not needed,
	// and next returns errSkipped without decoding it.
	next(decode bool, skip func(raw []byte) bool) (r row, pos position, bad *fieldError, err error)
	close() error
}

// position is where a row is in its file.
type position struct {
	line    int64 // 1-based; 0 where lines do not apply
	fileRow int64 // 0-based
}

type fileKind int

const (
	kindJSON    fileKind = iota // JSON array or JSON lines, told apart by the first byte
	kindJSONL                   // JSON lines
	kindParquet                 // Parquet
)

// fileType reads a file's kind and compression from its name.
func fileType(path string) (fileKind, string, error) {
	name := strings.ToLower(filepath.Base(path))
	comp := ""
	for _, c := range []string{".gz", ".zst"} {
		if strings.HasSuffix(name, c) {
			comp, name = c, strings.TrimSuffix(name, c)
		}
	}
	switch ext := filepath.Ext(name); ext {
	case ".jsonl", ".ndjson":
		return kindJSONL, comp, nil
	case ".json":
		return kindJSON, comp, nil
	case ".parquet":
		if comp != "" {
			return 0, "", fmt.Errorf("dataset %s: compressed parquet files are not supported (parquet compresses its pages itself)", path)
		}
		return kindParquet, "", nil
	}
	return 0, "", fmt.Errorf("dataset %s: unsupported file type: want .jsonl, .json or .parquet (jsonl and json may end in .gz or .zst)", path)
}

// SupportedFile reports whether the reader reads a file of this name (by
// its extension: .parquet, .jsonl, .ndjson, .json, the JSON ones also as .gz
// or .zst), and whether it reads it as Parquet. The error names the file and
// what is supported. A remote dataset (package dataset/hub) chooses the
// files to fetch by it, so that it never fetches a file the reader refuses.
func SupportedFile(path string) (parquet bool, err error) {
	kind, _, err := fileType(path)
	return err == nil && kind == kindParquet, err
}

// resolve turns Options.Path into the files to read, in sorted path order so
// that row indexes (the default ids) do not depend on the directory listing.
func resolve(path string) ([]string, error) {
	if path == "" {
		return nil, fmt.Errorf("dataset: no path")
	}
	var files []string
	if strings.ContainsAny(path, "*?[") {
		matches, err := filepath.Glob(path)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: bad glob: %w", path, err)
		}
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() {
				files = append(files, m)
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("dataset %s: no files match", path)
		}
		sort.Strings(files)
	} else {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("dataset %s: is a directory, and not a synthgen output directory (it holds no manifest); use a glob such as %s", path, filepath.Join(path, "*.jsonl"))
		}
		if !st.Mode().IsRegular() {
			// A FIFO or a device (a link to /dev/zero) never ends: counting
			// it would hang the start.
			return nil, fmt.Errorf("dataset %s: not a regular file (%s): give the dataset's file", path, st.Mode().Type())
		}
		files = []string{path}
	}
	for _, f := range files {
		if _, _, err := fileType(f); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// openSource opens one file for reading rows.
func openSource(path string) (source, error) {
	kind, comp, err := fileType(path)
	if err != nil {
		return nil, err
	}
	if kind == kindParquet {
		return openParquet(path)
	}
	br, closeFn, err := openText(path, comp)
	if err != nil {
		return nil, err
	}
	// Only ".json" is sniffed: a JSONL line may itself be an array (a bad row).
	isArray := false
	if kind == kindJSON {
		isArray, err = startsArray(br)
	} else {
		err = skipBOM(br)
	}
	if err != nil {
		closeFn()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if isArray {
		return newJSONArray(path, br, closeFn), nil
	}
	return newJSONL(path, br, closeFn), nil
}

// readBufSize is the read buffer of text files; lines longer than it are
// assembled from several reads.
const readBufSize = 256 << 10

// openText opens a JSON or JSONL file, decompressing by suffix, and returns
// a buffered reader of its text and a function closing everything.
func openText(path, comp string) (*bufio.Reader, func() error, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader = f
	closeFn := f.Close
	switch comp {
	case ".gz":
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, readBufSize))
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("dataset %s: gzip: %w", path, err)
		}
		r = zr
		closeFn = func() error { zr.Close(); return f.Close() }
	case ".zst":
		// One decoder goroutine: the dataset is read by one goroutine and
		// the machine's cores belong to the requests.
		zr, err := zstd.NewReader(bufio.NewReaderSize(f, readBufSize), zstd.WithDecoderConcurrency(1))
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("dataset %s: zstd: %w", path, err)
		}
		r = zr
		closeFn = func() error { zr.Close(); return f.Close() }
	}
	return bufio.NewReaderSize(r, readBufSize), closeFn, nil
}

// openFile opens a dataset file for reading: every file the package reads
// is opened here (tests count the bytes read, internal/readcount).
func openFile(path string) (readcount.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	return readcount.Wrap(path, f), nil
}

// skipBOM drops a UTF-8 byte order mark, which JSON decoders reject.
func skipBOM(br *bufio.Reader) error {
	if b, _ := br.Peek(3); len(b) == 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		_, err := br.Discard(3)
		return err
	}
	return nil
}

// startsArray tells a JSON array file from JSON lines by its first byte that
// is not white space or a byte order mark: many ".json" files on the Hub are
// JSON lines.
func startsArray(br *bufio.Reader) (bool, error) {
	if err := skipBOM(br); err != nil {
		return false, err
	}
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if len(b) < n {
			if err == io.EOF {
				return false, nil
			}
			return false, err
		}
		c := b[n-1]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		}
		return c == '[', nil
	}
}
