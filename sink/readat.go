package sink

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// ReadRecordsAt calls fn(i, rec) for the record at locs[i] of the data file
// path, for every i, in the order of the file (locs ascending): a JSONL
// file's (final, .open or .journal) record at byte offset locs[i] (its
// Span.Offset from ForEachRecord), a Parquet file's row locs[i] (0-based,
// in file order). The file is opened once and read forward, so that a
// viewer reads a page of records, or every record of a file, without
// reading the rest. A location that holds no complete record is an error
// naming the file and the location.
func ReadRecordsAt(path string, locs []int64, fn func(i int, rec *Record) error) error {
	order := make([]int, len(locs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(locs[a], locs[b]) })
	if strings.HasSuffix(path, suffixParquet) {
		return readParquetRows(path, locs, order, fn)
	}
	return readLinesAt(path, locs, order, func(i int, off int64, line []byte) error {
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%s: offset %d: %w", path, off, err)
		}
		return fn(i, &rec)
	})
}

// ReadLinesAt calls fn(i, line) for the line at byte offset locs[i] of the
// JSONL file path (final, .open or .journal), without its newline, for
// every i, in the order of the file: the bytes ReadRecordsAt decodes, for
// a reader that looks at them first (a search). The line is only valid
// during the call.
func ReadLinesAt(path string, locs []int64, fn func(i int, line []byte) error) error {
	order := make([]int, len(locs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(locs[a], locs[b]) })
	return readLinesAt(path, locs, order, func(i int, _ int64, line []byte) error { return fn(i, line) })
}

// readLinesAt reads the lines at locs[order[0]], locs[order[1]], ...,
// forward through one buffered reader (skipping up to 1 MiB between two,
// seeking past more).
func readLinesAt(path string, locs []int64, order []int, fn func(i int, off int64, line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var (
		pos  int64 = -1 // where br reads next; -1: not positioned
		long []byte
	)
	for _, i := range order {
		off := locs[i]
		if off < 0 {
			return fmt.Errorf("%s: offset %d: negative", path, off)
		}
		switch {
		case pos >= 0 && off >= pos && off-pos <= 1<<20:
			if _, err := br.Discard(int(off - pos)); err != nil {
				return fmt.Errorf("%s: offset %d: past the end", path, off)
			}
		default:
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				return fmt.Errorf("%s: offset %d: %w", path, off, err)
			}
			br.Reset(f)
		}
		pos = off
		long = long[:0]
		var line []byte
		for {
			chunk, err := br.ReadSlice('\n')
			pos += int64(len(chunk))
			if errors.Is(err, bufio.ErrBufferFull) {
				long = append(long, chunk...)
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: offset %d: no complete line", path, off)
			}
			line = chunk
			if len(long) > 0 {
				long = append(long, chunk...)
				line = long
			}
			break
		}
		line = line[:len(line)-1]
		if bytes.IndexByte(line, 0) >= 0 {
			return fmt.Errorf("%s: offset %d: NUL bytes (a power loss's tail)", path, off)
		}
		if err := fn(i, off, line); err != nil {
			return err
		}
	}
	return nil
}

// readParquetRows reads the rows locs[order[0]], locs[order[1]], ... of a
// Parquet part, skipping forward (parquet-go's SeekToRow) between them.
// parquet-go panics on some malformed pages: the panic becomes an error
// naming the file.
func readParquetRows(path string, locs []int64, order []int, fn func(i int, rec *Record) error) (err error) {
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
			err = fmt.Errorf("%s: unreadable: %v", path, p)
		}
	}()
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("%s: not a readable parquet file: %w", path, err)
	}
	if err := refuseLZ4(pf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	groups := pf.RowGroups()
	var (
		g      = -1                           // the row group rd reads
		rd     *parquet.GenericReader[Record] // nil: none open
		first  int64                          // the first row of group g
		next   int64                          // the row rd is at
		starts = make([]int64, len(groups)+1) // starts[k]: the first row of group k
	)
	for k, rg := range groups {
		starts[k+1] = starts[k] + rg.NumRows()
	}
	defer func() {
		if rd != nil {
			_ = rd.Close()
		}
	}()
	rows := make([]Record, 1)
	for _, i := range order {
		row := locs[i]
		if row < 0 || row >= starts[len(groups)] {
			return fmt.Errorf("%s: row %d: the file has %d", path, row, starts[len(groups)])
		}
		if g < 0 || row < first || row >= starts[g+1] {
			if rd != nil {
				_ = rd.Close()
			}
			g, _ = slices.BinarySearch(starts, row+1)
			g--
			first, next = starts[g], starts[g]
			rd = parquet.NewGenericRowGroupReader[Record](groups[g])
		}
		if row != next {
			if err := rd.SeekToRow(row - first); err != nil {
				return fmt.Errorf("%s: row %d: %w", path, row, err)
			}
		}
		clear(rows)
		n, err := rd.Read(rows)
		if n != 1 {
			if err == nil || errors.Is(err, io.EOF) {
				err = errors.New("no row read")
			}
			return fmt.Errorf("%s: row %d: %w", path, row, err)
		}
		next = row + 1
		rec := rows[0]
		rec.emptyTokensNil() // as ForEachRecord reads it
		if err := fn(i, &rec); err != nil {
			return err
		}
	}
	return nil
}
