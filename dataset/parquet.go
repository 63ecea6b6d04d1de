package dataset

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/internal/parquetsafe"
	"github.com/synthgen/synthgen/internal/readcount"

	"github.com/synthgen/synthgen/dataset/internal/parquetid"
)

// parquetSource reads a Parquet file row by row. Rows are reconstructed into
// map[string]any from the file's own schema, which reads the LIST encodings
// pyarrow, DuckDB and the Hub write (a Go struct without `,list` tags would
// silently read those lists as empty). Pages are read as rows are asked for:
// one row group's pages at a time, never the whole file.
//
// A row that is not decoded (another shard's, or one skip says is not
// needed) is not read either: the reader seeks past a run of them before
// the next row it reads, so a resume that skips most rows reads little.
type parquetSource struct {
	path string
	f    readcount.File
	// The untyped Reader reads a row of a schema known only at run time
	// into a map; its typed successor wants the row type at compile time.
	r       *parquet.Reader //lint:ignore SA1019 see above
	rows    int64           // rows in the file (its footer)
	fileRow int64
	seek    bool // rows were passed over: seek to fileRow before reading
	pf      *parquet.File
	ids     *parquetid.Column // the id column read alone, for skip; nil: none
}

// readIDs makes next hand skip each row's id from column field, read
// alone, instead of nothing (parquetid.New says which columns can be).
// Only from the first row: the column is read from there.
func (s *parquetSource) readIDs(field string) {
	if s.fileRow == 0 && s.ids == nil {
		s.ids = parquetid.New(s.pf, field)
	}
}

var _ source = (*parquetSource)(nil)

func openParquet(path string) (*parquetSource, error) {
	f, pf, err := openParquetFile(path)
	if err != nil {
		return nil, err
	}
	return &parquetSource{path: path, f: f, r: parquet.NewReader(pf), rows: pf.NumRows(), pf: pf}, nil
}

// openParquetFile opens a file and reads its footer.
func openParquetFile(path string) (readcount.File, *parquet.File, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("dataset: %w", err)
	}
	// Page indexes and bloom filters serve lookups; a sequential read
	// needs neither.
	pf, err := parquetsafe.Open(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return f, pf, nil
}

func (s *parquetSource) next(decode bool, skip func([]byte) bool) (r row, pos position, bad *fieldError, err error) {
	// parquet-go panics on some malformed files; a bad file must be an
	// error naming it, not a crash of an eight-hour job.
	defer parquetsafe.Catch(&err, func() string { return fmt.Sprintf("read %s:row %d", s.path, s.fileRow) })
	if s.fileRow >= s.rows {
		return nil, position{}, nil, io.EOF
	}
	pos = position{fileRow: s.fileRow}
	var raw []byte
	if s.ids != nil {
		// Every row takes its value, so that the column stays in step.
		var idErr error
		if raw, idErr = s.ids.Next(); idErr != nil {
			s.ids.Close()
			s.ids, raw = nil, nil // the rows are decoded, as without it
		}
	}
	if !decode || (skip != nil && skip(raw)) {
		s.fileRow++
		s.seek = true
		if !decode {
			return nil, pos, nil, nil
		}
		return nil, pos, nil, errSkipped
	}
	if s.seek {
		if err := s.r.SeekToRow(s.fileRow); err != nil {
			return nil, position{}, nil, fmt.Errorf("read %s:row %d: %w", s.path, s.fileRow, err)
		}
		s.seek = false
	}
	m := make(map[string]any, 4)
	if err := s.r.Read(&m); err != nil {
		if err == io.EOF {
			return nil, position{}, nil, fmt.Errorf("read %s:row %d: the file ends before the %d rows its footer counts", s.path, s.fileRow, s.rows)
		}
		return nil, position{}, nil, fmt.Errorf("read %s:row %d: %w", s.path, s.fileRow, err)
	}
	s.fileRow++
	return m, pos, nil, nil
}

func (s *parquetSource) close() error {
	if s.ids != nil {
		s.ids.Close()
	}
	err := s.r.Close()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
