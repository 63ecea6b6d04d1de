package sink

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// ReadRecordsAt calls fn(i, rec) for the record at locs[i] of the data file
// path, for every i, in the order of the file (locs ascending): in a file
// of lines (Lines: a JSONL part, .open or .journal) the record at byte
// offset locs[i] (its Span.Offset from ForEachRecord), in a converted part
// (Parquet) row locs[i] (0-based, in file order). The file is opened once and read forward, so that a
// viewer reads a page of records, or every record of a file, without
// reading the rest. A location that holds no complete record is an error
// naming the file and the location.
func ReadRecordsAt(path string, locs []int64, fn func(i int, rec *Record) error) error {
	return formatOf(path).readAt(path, locs, fileOrder(locs), fn)
}

// ReadLinesAt calls fn(i, line) for the line at byte offset locs[i] of the
// JSONL file path (final, .open or .journal), without its newline, for
// every i, in the order of the file: the bytes ReadRecordsAt decodes, for
// a reader that looks at them first (a search). The line is only valid
// during the call.
func ReadLinesAt(path string, locs []int64, fn func(i int, line []byte) error) error {
	return readLinesAt(path, locs, fileOrder(locs), func(i int, _ int64, line []byte) error { return fn(i, line) })
}

// fileOrder is the indices of locs in the order of the file: locs
// ascending, equal ones as given.
func fileOrder(locs []int64) []int {
	order := make([]int, len(locs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(locs[a], locs[b]) })
	return order
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
