package sink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/synthgen/synthgen/internal/diskfault"
)

// appendFile is a JSONL file appended under a temporary name (".open" for a
// JSONL part or an errors part, ".journal" for the rows of a future
// Parquet part). Lines reach the file through a bufio.Writer and become
// durable on sync; a crash can leave at most a torn last line, which
// recoverTail cuts.
type appendFile struct {
	path  string
	f     *os.File
	w     *bufio.Writer
	enc   *json.Encoder
	lines int  // complete lines in the file, including recovered ones
	dirty bool // bytes written since the last sync
	// pending counts the lines encoded since the last successful sync:
	// in the buffer or the page cache, not yet durable. onSync, when set,
	// is told how many became durable with each successful sync.
	pending int
	onSync  func(n int)
}

func createAppendFile(path string) (*appendFile, error) {
	// O_EXCL: a name is created once; finding it already there means the
	// recovery pass missed something, and appending to it could duplicate.
	step("create", path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create shard: %w", err)
	}
	// The new name must survive a crash too, or its fsynced lines would be
	// unreachable.
	if err := disk.SyncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, err
	}
	a := &appendFile{path: path, f: f, w: bufio.NewWriterSize(faultWriter{f: f, path: path}, 256<<10)}
	a.enc = json.NewEncoder(a.w)
	// Model output is full of <, > and &: keep them readable; the JSON is
	// equally valid.
	a.enc.SetEscapeHTML(false)
	return a, nil
}

// encode appends v as one line. json.Encoder marshals into its own reused
// buffer and hands the whole line to the bufio.Writer in one call. (A
// Record's line was written by hand until 2026-12-01: it saved under 3% of
// the CPU of a plain request, docs/decisions/2026-11-record-line-by-hand.md.)
func (a *appendFile) encode(v any) error {
	if err := a.enc.Encode(v); err != nil {
		return fmt.Errorf("append %s: %w", a.path, err)
	}
	a.lines++
	a.pending++
	a.dirty = true
	return nil
}

func (a *appendFile) sync() error {
	if !a.dirty {
		return nil
	}
	step("write", a.path)
	if err := a.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	step("fsync", a.path)
	if err := diskfault.Check("fsync", a.path); err != nil {
		return fmt.Errorf("fsync %s: %w", a.path, &fs.PathError{Op: "fsync", Path: a.path, Err: err})
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", a.path, err)
	}
	a.dirty = false
	if a.onSync != nil {
		a.onSync(a.pending)
	}
	a.pending = 0
	return nil
}

// faultWriter is the file under an appendFile's buffer. A fault a test
// injects (internal/diskfault) fails the write as a full disk does: part
// of the bytes land, which leaves a torn line for recovery to cut.
type faultWriter struct {
	f    *os.File
	path string
}

func (w faultWriter) Write(p []byte) (int, error) {
	if err := diskfault.Check("write", w.path); err != nil {
		n, _ := w.f.Write(p[:len(p)/2])
		return n, &fs.PathError{Op: "write", Path: w.path, Err: err}
	}
	return w.f.Write(p)
}

func (a *appendFile) close() error {
	err := a.sync()
	if cerr := a.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", a.path, cerr)
	}
	return err
}

// ForEachLine calls fn for every complete ('\n'-terminated) line of r, with
// the line's 1-based number and without its '\n'. It returns the byte length
// of the complete lines; bytes after the last '\n' are a torn tail and are
// not passed to fn. The slice passed to fn is only valid during the call.
func ForEachLine(r io.Reader, fn func(line []byte, n int) error) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		long     []byte // a line longer than br's buffer, assembled
		complete int64
		n        int
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return complete, nil
			}
			return complete, err
		}
		line := chunk
		if len(long) > 0 {
			long = append(long, chunk...)
			line = long
		}
		n++
		complete += int64(len(line))
		if err := fn(line[:len(line)-1], n); err != nil {
			return complete, err
		}
		long = long[:0]
	}
}

// lineKey extracts (id, sample) from one JSON line of a record or an error
// record without decoding the rest: resume reads ids only, and a record's
// reasoning is kilobytes. The sink writes "id" then "sample" first, so the
// fast path matches that prefix; anything else (escaped ids, other field
// order, files written by hand) takes the full decode, which also validates.
func lineKey(line []byte) (Key, error) {
	if k, ok := fastLineKey(line); ok {
		return k, nil
	}
	var v struct {
		ID     *string `json:"id"`
		Sample *int    `json:"sample"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return Key{}, err
	}
	if v.ID == nil {
		return Key{}, errors.New(`id: missing`)
	}
	if v.Sample == nil {
		return Key{}, errors.New(`sample: missing`)
	}
	return Key{ID: *v.ID, Sample: *v.Sample}, nil
}

var (
	prefixID     = []byte(`{"id":"`)
	prefixSample = []byte(`,"sample":`)
)

func fastLineKey(line []byte) (Key, bool) {
	if !bytes.HasPrefix(line, prefixID) || len(line) == 0 || line[len(line)-1] != '}' {
		return Key{}, false
	}
	rest := line[len(prefixID):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return Key{}, false
	}
	id := rest[:end]
	ascii := true
	for _, c := range id {
		if c < 0x20 { // control characters are invalid in a JSON string
			return Key{}, false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	// encoding/json reads invalid UTF-8 as U+FFFD: leave that to it so both
	// paths agree.
	if !ascii && !utf8.Valid(id) {
		return Key{}, false
	}
	rest = rest[end+1:]
	if !bytes.HasPrefix(rest, prefixSample) {
		return Key{}, false
	}
	rest = rest[len(prefixSample):]
	i := 0
	if i < len(rest) && rest[i] == '-' {
		i++
	}
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(rest) || (rest[i] != ',' && rest[i] != '}') {
		return Key{}, false
	}
	sample, err := strconv.Atoi(string(rest[:i]))
	if err != nil {
		return Key{}, false
	}
	return Key{ID: string(id), Sample: sample}, true
}

// FormatJSONL is the format whose parts are the appended JSON lines
// themselves: a part-N.jsonl.open renamed part-N.jsonl once full.
const FormatJSONL = "jsonl"

// jsonlFormat is FormatJSONL's partFormat.
type jsonlFormat struct{}

var _ partFormat = jsonlFormat{}

func init() { register(jsonlFormat{}) }

func (jsonlFormat) name() string { return FormatJSONL }
func (jsonlFormat) lines() bool  { return true }

func (jsonlFormat) convert(journal, _ string) (int, error) {
	return 0, fmt.Errorf("convert %s: a JSONL part is renamed, not converted", journal)
}

func (jsonlFormat) keys(path string, visit func(k Key, line int) error) (int, error) {
	return scanJSONLKeys(path, visit)
}

// records reads a file of lines up to its last complete line (a writer
// may be appending) and up to NUL bytes a power loss left.
func (jsonlFormat) records(path string, fn func(rec *Record, at Span) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var off int64
	_, err = ForEachLine(f, func(line []byte, n int) error {
		at := Span{Offset: off, Len: len(line)}
		off += int64(len(line)) + 1
		if bytes.IndexByte(line, 0) >= 0 {
			return errZeroFill
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		return fn(&rec, at)
	})
	if errors.Is(err, errZeroFill) {
		return nil
	}
	return err
}

func (jsonlFormat) readAt(path string, locs []int64, order []int, fn func(i int, rec *Record) error) error {
	return readLinesAt(path, locs, order, func(i int, off int64, line []byte) error {
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%s: offset %d: %w", path, off, err)
		}
		return fn(i, &rec)
	})
}

// scanJSONLKeys reads the keys of a final JSONL file (a data part or an
// errors part) in file order. A final file is complete by construction, so
// a torn or undecodable line is corruption: an error naming file:line.
func scanJSONLKeys(path string, fn func(k Key, line int) error) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read shard: %w", err)
	}
	defer f.Close()
	lines := 0
	complete, err := ForEachLine(f, func(line []byte, n int) error {
		k, err := lineKey(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		lines = n
		return fn(k, n)
	})
	if err != nil {
		return lines, err
	}
	st, err := f.Stat()
	if err != nil {
		return lines, fmt.Errorf("read shard: %w", err)
	}
	if st.Size() != complete {
		return lines, fmt.Errorf("%s:%d: last line is incomplete (%d bytes without a newline): the file was cut after it was finalized",
			path, lines+1, st.Size()-complete)
	}
	return lines, nil
}

// errZeroFill stops recoverTail at a line holding a NUL byte.
var errZeroFill = errors.New("line holds a NUL byte")

// recoverTail makes a temporary JSONL file (.open, .journal) left by a crash
// consistent: bytes after the last '\n' are a line torn mid-write and are
// cut; every complete line must be a JSON object with a key, else the error
// names file:line and the file is left as it was. It returns the number of
// complete lines. A valid complete line is never dropped: the cut only
// removes bytes no '\n' followed, which no reader could have taken as a
// record, or starts at a line holding a NUL byte (below).
//
// After a power loss, some filesystems show the unsynced end of an appended
// file as NUL bytes, possibly followed by a later page that reached the
// disk. encoding/json never writes a raw NUL (it escapes control
// characters), so the first line holding one is where unsynced data begins,
// and everything from it on was never fsynced: it is cut like a torn line,
// rather than refusing a directory nothing but a power loss made.
//
// The file is fsynced in every case before it returns: after kill -9 the
// page cache still holds lines the killed process never fsynced, and the
// caller is about to give them a final name and mark their keys done.
func recoverTail(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("recover shard: %w", err)
	}
	defer f.Close()
	lines := 0
	var kept int64 // bytes of the valid complete lines
	_, err = ForEachLine(f, func(line []byte, n int) error {
		if bytes.IndexByte(line, 0) >= 0 {
			return errZeroFill
		}
		if !json.Valid(line) {
			return fmt.Errorf("%s:%d: not a JSON record", path, n)
		}
		if _, err := lineKey(line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		lines = n
		kept += int64(len(line)) + 1
		return nil
	})
	if err != nil && !errors.Is(err, errZeroFill) {
		return lines, err
	}
	st, err := f.Stat()
	if err != nil {
		return lines, fmt.Errorf("recover shard: %w", err)
	}
	if st.Size() != kept {
		step("truncate", path)
		if err := f.Truncate(kept); err != nil {
			return lines, fmt.Errorf("cut torn line of %s: %w", path, err)
		}
	}
	step("fsync", path)
	if err := f.Sync(); err != nil {
		return lines, fmt.Errorf("fsync %s: %w", path, err)
	}
	return lines, nil
}
