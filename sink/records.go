package sink

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink/layout"
)

// This file reads records back for tools that use a directory's data (the
// audit, package sink/audit, and export): every record of one data file
// with where it is, and the error records of a directory. The audit decides
// which files count; these read them.

// Span is where a record's JSON line is in a JSONL file (final, .open or
// .journal): Len bytes from Offset, without the newline. A Parquet row has
// no line: its Span is zero.
type Span struct {
	Offset int64
	Len    int
}

// CompareKeys orders keys by id, then by sample: the order of `synthgen
// export` and of the audit's lists. Ids are in a total order (compareIDs):
// decimal ids first, as numbers ("2" before "10"); then the others as text,
// an id ending in ":" and digits (a dataset sharded by file:
// "data/a.jsonl:10") by the text before them, then that number.
func CompareKeys(a, b Key) int { return compareKeys(a, b) }

// ForEachRecord calls fn for every record of the data file path, in file
// order. A file of JSON lines (Lines: a JSONL part, or a temporary) is
// read up to its last complete line (a writer may be appending) and up to
// NUL bytes a power loss left; a line that does not decode is an error
// naming path:line. A converted part (Parquet) is read row by row.
func ForEachRecord(path string, fn func(rec *Record, at Span) error) error {
	return formatOf(path).records(path, fn)
}

// ErrorFiles lists the error files of errDir (final and .open) in index
// order; none when the directory does not exist.
func ErrorFiles(errDir string) ([]string, error) {
	entries, err := os.ReadDir(errDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		p, ok := ParsePart(e.Name())
		if ok && e.Type().IsRegular() && p.Format == FormatJSONL && (p.Suffix == "" || p.Suffix == SuffixOpen) {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, _ := ParsePart(a)
		pb, _ := ParsePart(b)
		return cmp.Or(cmp.Compare(pa.Index, pb.Index), strings.Compare(a, b))
	})
	return names, nil
}

// ForEachError calls fn for every error record of DIR/errors, in the order
// they were written (a later one for a key replaces an earlier). Lines that
// do not decode are skipped: the audit reports them as problems.
func ForEachError(dir string, fn func(*ErrorRecord) error) error {
	errDir := layout.Dir(dir).Errors()
	names, err := ErrorFiles(errDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := filepath.Join(errDir, name)
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(name, SuffixOpen) {
			f, err = os.Open(strings.TrimSuffix(path, SuffixOpen)) // finalized since the listing
		}
		if err != nil {
			return err
		}
		_, err = ForEachLine(f, func(line []byte, _ int) error {
			var e ErrorRecord
			if json.Unmarshal(line, &e) != nil || e.ID == "" {
				return nil
			}
			return fn(&e)
		})
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
