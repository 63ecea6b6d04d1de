package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
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

// FormatParquet is the format whose parts are converted to Parquet from
// their journal.
const FormatParquet = "parquet"

// parquetFormat is FormatParquet's partFormat.
type parquetFormat struct{}

var _ partFormat = parquetFormat{}

func init() { register(parquetFormat{}) }

func (parquetFormat) name() string { return FormatParquet }
func (parquetFormat) lines() bool  { return false }

func (parquetFormat) convert(journal, final string) (int, error) {
	return convertJournal(journal, final)
}

func (parquetFormat) keys(path string, visit func(k Key, row int) error) (int, error) {
	return scanParquetKeys(path, visit)
}

func (parquetFormat) records(path string, fn func(rec *Record, at Span) error) error {
	return eachParquetRecord(path, func(rec *Record) error { return fn(rec, Span{}) })
}

func (parquetFormat) readAt(path string, locs []int64, order []int, fn func(i int, rec *Record) error) error {
	return readParquetRows(path, locs, order, fn)
}

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
	if rows, err = writeJournalRows(in, journal, tmp, w); err != nil {
		return 0, err
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

// writeJournalRows writes the journal's rows to w, a batch at a time (a
// row group ends every rowGroupBytes of journal), and refuses a journal
// whose last line is torn.
func writeJournalRows(in *os.File, journal, tmp string, w *parquet.GenericWriter[Record]) (rows int, err error) {
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
		return rows, err
	}
	if err := flush(); err != nil {
		return rows, err
	}
	if st, err := in.Stat(); err != nil {
		return rows, fmt.Errorf("convert journal: %w", err)
	} else if st.Size() != complete {
		return rows, fmt.Errorf("%s: ends in a torn line: recover it before converting", journal)
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
