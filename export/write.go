package export

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink"
)

// shape is how a format makes its row of type T from a record and, for the
// formats that write them, from an error record. A format that makes
// several rows of a record (speculators: one per turn) sets records
// instead of record.
type shape[T any] struct {
	record  func(rec *sink.Record, reasoning string) T
	records func(rec *sink.Record, reasoning string) []T
	failure func(e *sink.ErrorRecord) T
}

// rowWriter writes rows of T to one file.
type rowWriter[T any] interface {
	write(row T) error
	close() error // flushes; the caller commits the file
}

// jsonlWriter writes a JSON object per line, HTML characters unescaped.
type jsonlWriter[T any] struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

func newJSONL[T any](w io.Writer) *jsonlWriter[T] {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonlWriter[T]{bw: bw, enc: enc}
}

func (w *jsonlWriter[T]) write(row T) error { return w.enc.Encode(row) }
func (w *jsonlWriter[T]) close() error      { return w.bw.Flush() }

// parquetWriter writes rows in batches (zstd, standard LIST layout from the
// row types' ,list tags, so DuckDB, pyarrow and datasets read the lists).
type parquetWriter[T any] struct {
	w     *parquet.GenericWriter[T]
	batch []T
}

const parquetBatch = 64

// parquetRowGroup is the most rows of one Parquet row group: the writer
// holds a row group's pages in memory until it is flushed, so that a file
// of ten million rows would otherwise be held whole.
var parquetRowGroup int64 = 64 << 10

func newParquet[T any](w io.Writer) *parquetWriter[T] {
	return &parquetWriter[T]{w: parquet.NewGenericWriter[T](w, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(parquetRowGroup))}
}

func (w *parquetWriter[T]) write(row T) error {
	w.batch = append(w.batch, row)
	if len(w.batch) < parquetBatch {
		return nil
	}
	return w.flush()
}

func (w *parquetWriter[T]) flush() error {
	if len(w.batch) == 0 {
		return nil
	}
	_, err := w.w.Write(w.batch)
	clear(w.batch)
	w.batch = w.batch[:0]
	return err
}

func (w *parquetWriter[T]) close() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.w.Close()
}

// rowsOf reads the entries in key order and gives each row sh makes of
// them to yield, stopping between records when ctx is done.
func rowsOf[T any](ctx context.Context, o Options, x *index, sh shape[T]) func(yield func(T) error) error {
	return func(yield func(T) error) error {
		var rec sink.Record
		var buf []byte
		return x.each(func(i int, e entry) error {
			if i%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if e.src < 0 {
				return yield(sh.failure(x.errs[e.n]))
			}
			var err error
			if buf, err = x.record(e, &rec, buf); err != nil {
				return err
			}
			if sh.records != nil {
				for _, row := range sh.records(&rec, o.Reasoning) {
					if err := yield(row); err != nil {
						return err
					}
				}
				return nil
			}
			return yield(sh.record(&rec, o.Reasoning))
		})
	}
}

// write reads the entries in key order and writes them to the output.
func write[T any](ctx context.Context, o Options, x *index, sum *Summary, sh shape[T]) error {
	rows := rowsOf(ctx, o, x, sh)
	switch {
	case o.HF:
		return writeHF(ctx, o, sum, rows)
	case o.Out == "-":
		w := newJSONL[T](o.Stdout)
		if err := rows(w.write); err != nil {
			return err
		}
		sum.Files = []string{"-"}
		return w.close()
	}
	f, err := durable.CreateTemp(o.Out, tempPattern(o.Out), 0o644)
	if err != nil {
		return err
	}
	var w rowWriter[T] = newJSONL[T](f)
	if o.parquet() {
		w = newParquet[T](f)
	}
	err = rows(w.write)
	if err == nil {
		err = w.close()
	}
	if err == nil {
		err = ctx.Err() // a signal after the last record still leaves Out as it was
	}
	if err != nil {
		f.Abort()
		return err
	}
	sum.Files = []string{o.Out}
	return f.Commit()
}

// defaultRowsPerFile is the rows of one HF Parquet file: a few hundred MB
// of reasoning answers, which the Hub and datasets handle well.
const defaultRowsPerFile = 100_000

// writeHF writes Out as a Hugging Face dataset directory: data/train-
// 0000i-of-0000N.parquet and README.md. It is built under a temporary name
// beside Out (temp.go), every file fsynced, then renamed to Out, or put in
// the place of the dataset an earlier export wrote there (Overwrite): a
// killed export leaves Out as it was and a temporary the next export
// removes, never a partial dataset under Out.
func writeHF[T any](ctx context.Context, o Options, sum *Summary, rows func(func(T) error) error) (err error) {
	if err := o.replaceable(); err != nil {
		return err
	}
	tmp, err := tempDir(o.Out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	dataDir := filepath.Join(tmp, "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		return err
	}
	per := int64(o.RowsPerFile)
	if per <= 0 {
		per = defaultRowsPerFile
	}
	rowCount := sum.Exported + sum.ErrorLines
	nfiles := max((rowCount+per-1)/per, 1)
	var (
		cur   *os.File
		w     *parquetWriter[T]
		inCur int64
	)
	closeCur := func() error {
		if cur == nil {
			return nil
		}
		err := w.close()
		if err == nil {
			err = cur.Sync()
		}
		if cerr := cur.Close(); err == nil {
			err = cerr
		}
		cur = nil
		return err
	}
	next := func() error {
		if err := closeCur(); err != nil {
			return err
		}
		name := fmt.Sprintf("train-%05d-of-%05d.parquet", len(sum.Files), nfiles)
		f, err := os.OpenFile(filepath.Join(dataDir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		cur, w, inCur = f, newParquet[T](f), 0
		sum.Files = append(sum.Files, filepath.Join("data", name))
		return nil
	}
	defer func() {
		if cur != nil {
			_ = cur.Close()
		}
	}()
	if err := next(); err != nil {
		return err
	}
	err = rows(func(row T) error {
		if inCur == per {
			if err := next(); err != nil {
				return err
			}
		}
		inCur++
		return w.write(row)
	})
	if err != nil {
		return err
	}
	if err := closeCur(); err != nil {
		return err
	}
	if int64(len(sum.Files)) != nfiles {
		return fmt.Errorf("wrote %d files, planned %d: the directories changed while exporting", len(sum.Files), nfiles)
	}
	sum.Files = append(sum.Files, "README.md")
	if err := durable.WriteFile(filepath.Join(tmp, "README.md"), []byte(Card(o, sum)), 0o644); err != nil {
		return err
	}
	if err := durable.SyncDir(dataDir); err != nil {
		return err
	}
	if err := durable.SyncDir(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // a signal after the last record still leaves Out as it was
	}
	if err := o.replaceable(); err != nil {
		return err // Out appeared, or changed, while the export ran
	}
	if err := putInPlace(tmp, o.Out); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(o.Out))
}
