package sink

// Reading a Parquet part back: its keys (a resume), its records (the
// audit, export), the records at given rows (the view). Every reader opens
// the file through openParquet, the one guard.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/synthgen/synthgen/internal/parquetsafe"
)

// openParquet opens the Parquet part at path, reads its footer (page
// indexes only with seek: SeekToRow uses them; never bloom filters),
// refuses LZ4 (refuseLZ4) and calls fn. parquet-go panics on some
// malformed pages: a panic in any of it, fn's reading included, is an
// error (parquetsafe), so that a corrupt part is an error naming it, not
// a crash of a resume. Errors of the file's own are prefixed with name
// when it is not "" (the audit names the part itself); fn's are its own.
func openParquet(path, name string, seek bool, fn func(pf *parquet.File) error) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	named := func(err error) error {
		if name == "" {
			return err
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	defer parquetsafe.Catch(&err, func() string { return name })
	pf, err := parquetsafe.Open(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(!seek))
	if err != nil {
		return named(err)
	}
	if err := refuseLZ4(pf); err != nil {
		return named(err)
	}
	return fn(pf)
}

// refuseLZ4 rejects a file with LZ4 columns before any page is read.
// parquet-go's LZ4 decoder doubles its buffer until a block decodes, so a
// corrupt LZ4 page allocates without bound and kills the process, which no
// recover catches (found by sink/audit's FuzzInspectParquet). The sink never
// writes LZ4.
func refuseLZ4(pf *parquet.File) error {
	for g, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			if c := cc.MetaData.Codec; c == format.Lz4Raw || c == format.Lz4 {
				return fmt.Errorf("row group %d: column %s: %s compression is not read (the sink never writes it)",
					g, strings.Join(cc.MetaData.PathInSchema, "."), c)
			}
		}
	}
	return nil
}

// scanParquetKeys reads only the id and sample columns of a Parquet part
// and calls fn for each row's key in file order. A file that does not parse
// (no footer, bad pages, missing columns) is an error naming it.
func scanParquetKeys(path string, fn func(k Key, row int) error) (int, error) {
	var n int
	err := openParquet(path, path, false, func(pf *parquet.File) error {
		var err error
		n, err = parquetKeys(path, pf, fn)
		return err
	})
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		err = fmt.Errorf("read shard: %w", err) // the file did not open
	}
	return n, err
}

func parquetKeys(path string, pf *parquet.File, fn func(k Key, row int) error) (int, error) {
	idCol, ok := pf.Schema().Lookup("id")
	if !ok {
		return 0, fmt.Errorf("%s: no id column", path)
	}
	sampleCol, ok := pf.Schema().Lookup("sample")
	if !ok {
		return 0, fmt.Errorf("%s: no sample column", path)
	}
	row := 0
	var ids []string
	var samples []int64
	for g, rg := range pf.RowGroups() {
		chunks := rg.ColumnChunks()
		ids = ids[:0]
		samples = samples[:0]
		if err := readColumn(chunks[idCol.ColumnIndex], func(v parquet.Value) error {
			ids = append(ids, string(v.ByteArray()))
			return nil
		}); err != nil {
			return row, fmt.Errorf("%s: row group %d: id: %w", path, g, err)
		}
		if err := readColumn(chunks[sampleCol.ColumnIndex], func(v parquet.Value) error {
			samples = append(samples, v.Int64())
			return nil
		}); err != nil {
			return row, fmt.Errorf("%s: row group %d: sample: %w", path, g, err)
		}
		if len(ids) != len(samples) || int64(len(ids)) != rg.NumRows() {
			return row, fmt.Errorf("%s: row group %d: %d ids, %d samples, %d rows",
				path, g, len(ids), len(samples), rg.NumRows())
		}
		for i := range ids {
			if err := fn(Key{ID: ids[i], Sample: int(samples[i])}, row); err != nil {
				return row, err
			}
			row++
		}
	}
	return row, nil
}

func readColumn(chunk parquet.ColumnChunk, fn func(parquet.Value) error) error {
	pages := chunk.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 512)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = readPage(p, buf, fn)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

func readPage(p parquet.Page, buf []parquet.Value, fn func(parquet.Value) error) error {
	vr := p.Values()
	for {
		n, err := vr.ReadValues(buf)
		for _, v := range buf[:n] {
			if v.IsNull() {
				return errors.New("null value")
			}
			if err := fn(v); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readBatch is how many Parquet rows are decoded per read.
const readBatch = 64

var recordSchema = parquet.SchemaOf(Record{})

// addedColumns are the record's columns that parts written before them
// lack: they read as empty (a part of a first-turn job has no turns).
var addedColumns = map[string]bool{"turns": true, "prompt_token_ids": true, "token_ids": true, "token_ids_mismatch": true, "logprobs": true,
	"cached_tokens": true, "cost": true,
	"tools": true, "tool_calls": true, "tool_calls_invalid": true, "divergence": true}

// eachParquetRecord reads every row of a Parquet part, readBatch rows
// at a time. Its errors do not name the file: the audit, which shows them
// beside the part's name, and ForEachRecord's callers name it.
func eachParquetRecord(path string, fn func(*Record) error) error {
	return openParquet(path, "", false, func(pf *parquet.File) error {
		for _, col := range recordSchema.Columns() {
			if _, ok := pf.Schema().Lookup(col...); !ok && !addedColumns[col[0]] && !addedMessageColumn(col) {
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
	})
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
			rows[i].emptyToolsNil()
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

// readParquetRows reads the rows locs[order[0]], locs[order[1]], ... of a
// Parquet part, skipping forward (parquet-go's SeekToRow) between them.
func readParquetRows(path string, locs []int64, order []int, fn func(i int, rec *Record) error) error {
	return openParquet(path, path, true, func(pf *parquet.File) error { return readRows(path, pf, locs, order, fn) })
}

func readRows(path string, pf *parquet.File, locs []int64, order []int, fn func(i int, rec *Record) error) error {
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
		rec.emptyToolsNil()
		if err := fn(i, &rec); err != nil {
			return err
		}
	}
	return nil
}
