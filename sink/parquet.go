package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// A Parquet part cannot be appended to (its footer comes last), yet its
// records must be durable as they arrive. So the rows of the part being
// filled are journaled as JSONL in part-N.parquet.journal (same encoding as
// a JSONL part, fsynced on the same schedule), and on rotation, Close or
// recovery the journal becomes a Parquet file:
//
//	journal --convert--> part-N.parquet.tmp --fsync, rename--> part-N.parquet
//	--fsync dir--> remove journal
//
// Whatever step a crash interrupts, recovery finds one of these states and
// every record stays in exactly one place: journal + final means the final is
// complete (it appears only by rename of an fsynced file) and the journal is
// dropped; journal (+ a .tmp) means the conversion is redone from the journal.

// The suffixes of part file names. A temporary's (Part.Suffix) follows the
// final name it becomes.
const (
	suffixJSONL   = ".jsonl"
	suffixParquet = ".parquet"
	SuffixOpen    = ".open"    // JSONL part or errors part being appended
	SuffixJournal = ".journal" // rows of the Parquet part being filled
	SuffixTmp     = ".tmp"     // Parquet file being converted
)

// convertBatch is how many journal rows are decoded before they are handed
// to the Parquet writer: enough to amortize the call, small in memory. A
// batch also ends at convertBatchBytes of JSON, so that rows with token
// logprobs (megabytes each) are not held 64 at a time.
const (
	convertBatch      = 64
	convertBatchBytes = 8 << 20
)

// rowGroupBytes is how much journal JSON one Parquet row group holds at
// most. parquet-go keeps a row group's columns in memory until it is
// written, growing them as rows come: a part of answers with logprobs
// (about 360 bytes of JSON a token at 20 alternatives) would otherwise be
// held whole, hundreds of megabytes. A part of text answers stays one row
// group (1000 answers of 64 KiB). Measured on 100 answers of 8,192 tokens
// at 20 logprobs: a conversion's heap peak 116 MB, against 254 MB (and
// growing with the part) as one row group. A variable for the tests.
var rowGroupBytes = 64 << 20

// convertJournal writes the records of a journal (complete lines only: the
// caller has cut any torn tail) as the Parquet file final, via final+".tmp".
// It returns the number of rows written.
func convertJournal(journal, final string) (rows int, err error) {
	tmp := final + SuffixTmp
	step("remove", tmp)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	in, err := os.Open(journal)
	if err != nil {
		return 0, fmt.Errorf("convert journal: %w", err)
	}
	defer in.Close()
	step("create", tmp)
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("convert journal: %w", err)
	}
	defer func() {
		if err != nil {
			_ = out.Close()
			_ = os.Remove(tmp)
		}
	}()

	w := parquet.NewGenericWriter[Record](out, writerOptions...)
	batch := make([]Record, convertBatch)
	n, batchBytes, groupBytes := 0, 0, 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		if _, err := w.Write(batch[:n]); err != nil {
			return fmt.Errorf("write %s: %w", tmp, err)
		}
		clear(batch[:n]) // the rows are the writer's now: free their lists
		rows += n
		n, batchBytes = 0, 0
		if groupBytes >= rowGroupBytes {
			groupBytes = 0
			if err := w.Flush(); err != nil { // ends the row group
				return fmt.Errorf("write %s: %w", tmp, err)
			}
		}
		return nil
	}
	complete, err := ForEachLine(in, func(line []byte, ln int) error {
		batch[n] = Record{}
		if err := json.Unmarshal(line, &batch[n]); err != nil {
			return fmt.Errorf("%s:%d: %w", journal, ln, err)
		}
		n++
		batchBytes += len(line)
		groupBytes += len(line)
		if n == len(batch) || batchBytes >= convertBatchBytes || groupBytes >= rowGroupBytes {
			return flush()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if st, err := in.Stat(); err != nil {
		return 0, fmt.Errorf("convert journal: %w", err)
	} else if st.Size() != complete {
		return 0, fmt.Errorf("%s: ends in a torn line: recover it before converting", journal)
	}
	step("write", tmp)
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("write %s: %w", tmp, err)
	}
	step("fsync", tmp)
	if err := out.Sync(); err != nil {
		return 0, fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := out.Close(); err != nil {
		return 0, fmt.Errorf("close %s: %w", tmp, err)
	}
	step("rename", tmp)
	if err := os.Rename(tmp, final); err != nil {
		return 0, fmt.Errorf("finalize shard: %w", err)
	}
	if err := disk.SyncDir(filepath.Dir(final)); err != nil {
		return 0, err
	}
	// The final file holds every row now; a journal that survives a crash
	// here is recognized (journal + final) and dropped by recovery.
	step("remove", journal)
	if err := os.Remove(journal); err != nil {
		return rows, fmt.Errorf("remove journal: %w", err)
	}
	return rows, nil
}

// writerOptions are how a part is written.
//
// Pages of 64 KiB rather than 256: the writer holds a page buffer per
// column, and with the codec below this brought the Parquet run's peak
// RSS from 3.0-3.9x the JSONL run's to 1.3x, for files 7% larger.
//
// The record's only INT32 and FLOAT columns are its tokens' ids and
// logprobs: DELTA_BINARY_PACKED packs ids of a 151K vocabulary in 18
// bits rather than 32, and BYTE_STREAM_SPLIT puts the logprobs'
// sign-and-exponent bytes together, which zstd then compresses. At 20
// logprobs a token costs 124 bytes instead of 160 (the README's
// figures, sink's TestTokensBytesOnDisk); DuckDB and pyarrow read both
// encodings.
//
// The long text columns get no min/max statistics, neither in the footer
// (SkipPageBounds) nor in each page's header (SkipPageStatistics):
// parquet-go keeps them whole, so one 6.5 MB answer made a part of 43 MB
// with a 13.6 MB footer, and no query prunes on the bounds of an answer
// (docs/decisions/2026-12-parquet-text-statistics.md). The column index
// bounds stay, cut to 16 bytes by the library.
var writerOptions = append([]parquet.WriterOption{
	parquet.Compression(partCodec), parquet.PageBufferSize(64 << 10),
	parquet.DefaultEncodingFor(parquet.Int32, &parquet.DeltaBinaryPacked), parquet.DefaultEncodingFor(parquet.Float, &parquet.ByteStreamSplit),
}, noTextStatistics()...)

// longText names the record's text columns whose values are unbounded: a
// leaf of one of these names anywhere in the schema (the record's, a
// message's, a turn's).
var longText = map[string]bool{"reasoning": true, "content": true, "token_ids_mismatch": true}

// noTextStatistics drops the statistics of every long text column of the
// record's schema, so that a column added under one of those names is
// covered too.
func noTextStatistics() []parquet.WriterOption {
	var opts []parquet.WriterOption
	for _, path := range recordSchema.Columns() {
		if longText[path[len(path)-1]] {
			opts = append(opts, parquet.SkipPageBounds(path...), parquet.SkipPageStatistics(path...))
		}
	}
	return opts
}

// partCodec is Zstandard as parquet.Zstd writes it, with a window of
// 1 MiB instead of the library's 8 MiB: a page is far smaller than either,
// so the files are the same size, and the encoder's history buffers are an
// eighth (see ARCHITECTURE.md, "Measured decisions"). One encoder serves
// every conversion; EncodeAll may be called concurrently.
var partCodec = &zstdCodec{}

type zstdCodec struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

func (c *zstdCodec) String() string { return parquet.Zstd.String() }
func (c *zstdCodec) CompressionCodec() format.CompressionCodec {
	return parquet.Zstd.CompressionCodec()
}
func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) { return parquet.Zstd.Decode(dst, src) }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		c.enc, c.err = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(1<<20),
			zstd.WithZeroFrames(true),
			zstd.WithEncoderCRC(false),
		)
	})
	if c.err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", c.err)
	}
	return c.enc.EncodeAll(src, dst[:0]), nil
}

// scanParquetKeys reads only the id and sample columns of a Parquet part
// and calls fn for each row's key in file order. A file that does not parse
// (no footer, bad pages, missing columns) is an error naming it.
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

func scanParquetKeys(path string, fn func(k Key, row int) error) (n int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("read shard: %w", err)
	}
	// parquet-go panics on some malformed pages: a corrupt part is an
	// error naming it, not a crash of the resume.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: unreadable parquet file: %v", path, p)
		}
	}()
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return 0, fmt.Errorf("%s: not a readable parquet file: %w", path, err)
	}
	if err := refuseLZ4(pf); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
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
