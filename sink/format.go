package sink

import (
	"fmt"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink/keyset"
)

// Output formats.
const (
	FormatJSONL   = "jsonl"
	FormatParquet = "parquet"
)

// partFormat is one output format of the data parts. Every part is first
// appended as JSONL, a line per record, so that a record is durable after
// one fsync and a crash leaves at most a torn last line to cut. A format
// says what a finished part becomes and how its final file is read back;
// the sink's durability (temporary names, renames, recovery of every crash
// state) is the same for all.
//
// To add a format: a file beside jsonl.go and parquet.go with its convert
// and keys functions, its entry in formats, and its reader of records in
// ForEachRecord (records.go).
type partFormat struct {
	// convert writes the final file from the finished JSONL journal and
	// returns the rows it wrote; it writes under a temporary name and
	// renames. nil: the JSONL file itself becomes the final file (jsonl).
	convert func(journal, final string) (rows int, err error)
	// keys visits every key of a final file in order: a resume reads ids
	// only.
	keys func(path string, visit func(k Key, row int) error) (int, error)
}

var formats = map[string]partFormat{
	FormatJSONL:   {keys: scanJSONLKeys},
	FormatParquet: {convert: convertJournal, keys: scanParquetKeys},
}

// ScanKeys visits every key of the final file path of format, in file
// order, reading ids only (what a resume reads), and returns how many there
// were. A file that does not read is an error naming it.
func ScanKeys(path, format string, visit func(Key) error) (int, error) {
	f, ok := formats[format]
	if !ok {
		return 0, fmt.Errorf("read %s: format %q: want %s", path, format, strings.Join(formatNames(), " or "))
	}
	return f.keys(path, func(k Key, _ int) error { return visit(k) })
}

// Formats lists the output formats, sorted.
func Formats() []string { return formatNames() }

// formatNames lists the formats, sorted, for messages and file names.
func formatNames() []string {
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// tempSuffix is the name suffix of a part of format f while it is filled:
// .open for a file that is renamed as is, .journal for one converted.
func tempSuffix(f string) string {
	if formats[f].convert != nil {
		return SuffixJournal
	}
	return SuffixOpen
}

func checkFormat(f string) error {
	if _, ok := formats[f]; !ok {
		return fmt.Errorf("output.format: %q: want %s", f, strings.Join(formatNames(), " or "))
	}
	return nil
}

// SummarizeKeys is the key summary (ShardInfo.Keys) of the final part at
// path of format, as its writer records it: nil when its ids get none
// (other ids than row indices, or too sparse). The audit holds a
// manifest's summaries to it.
func SummarizeKeys(path, format string) ([]keyset.SampleKeys, error) {
	var c keyset.Summary
	n, err := ScanKeys(path, format, func(k Key) error {
		c.Add(k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Keys(n), nil
}
