package sink

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
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
// order. A JSONL file is read up to its last complete line (a writer may be
// appending) and up to NUL bytes a power loss left; a line that does not
// decode is an error naming path:line. A Parquet file (name ending in
// .parquet) is read row by row.
func ForEachRecord(path string, fn func(rec *Record, at Span) error) error {
	if strings.HasSuffix(path, suffixParquet) {
		return eachParquetRecord(path, func(rec *Record) error { return fn(rec, Span{}) })
	}
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

// readBatch is how many Parquet rows are decoded per read.
const readBatch = 64

var recordSchema = parquet.SchemaOf(Record{})

// addedColumns are the record's columns that parts written before them
// lack: they read as empty (a part of a first-turn job has no turns).
var addedColumns = map[string]bool{"turns": true, "prompt_token_ids": true, "token_ids": true, "token_ids_mismatch": true, "logprobs": true}

// eachParquetRecord reads every row of a Parquet part, readBatch rows
// at a time. parquet-go panics on some malformed pages: the panic becomes
// an error naming the file.
func eachParquetRecord(path string, fn func(*Record) error) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("unreadable: %v", p)
		}
	}()
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return fmt.Errorf("not a readable parquet file: %w", err)
	}
	if err := refuseLZ4(pf); err != nil {
		return err
	}
	for _, col := range recordSchema.Columns() {
		if _, ok := pf.Schema().Lookup(col...); !ok && !addedColumns[col[0]] {
			return fmt.Errorf("schema: no column %s", strings.Join(col, "."))
		}
	}
	rows := make([]Record, readBatch)
	for g, rg := range pf.RowGroups() {
		if err := eachRowGroupRecord(g, rg, rows, fn); err != nil {
			return err
		}
	}
	return nil
}

func eachRowGroupRecord(g int, rg parquet.RowGroup, rows []Record, fn func(*Record) error) error {
	rd := parquet.NewGenericRowGroupReader[Record](rg)
	defer rd.Close()
	var got int64
	for {
		clear(rows)
		n, err := rd.Read(rows)
		for i := range rows[:n] {
			rows[i].emptyTokensNil()
			if ferr := fn(&rows[i]); ferr != nil {
				return ferr
			}
		}
		got += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
		if n == 0 {
			return fmt.Errorf("row group %d: reader made no progress", g)
		}
	}
	if got != rg.NumRows() {
		return fmt.Errorf("row group %d: %d rows read, footer says %d", g, got, rg.NumRows())
	}
	return nil
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
	errDir := filepath.Join(dir, "errors")
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
