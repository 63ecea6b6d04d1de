package sink

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink/keyset"
)

// partFormat is one output format of the data parts: how a finished part
// becomes its final file, and how that file is read back (its keys, its
// records, the records at given locations). Every part is first appended
// as JSONL, a line per record, so that a record is durable after one
// fsync and a crash leaves at most a torn last line to cut; the sink's
// durability (temporary names, renames, recovery of every crash state) is
// the same for all formats.
//
// To add a format: one file beside jsonl.go and parquet.go with its type,
// `var _ partFormat = ...` and its register call in init. Nothing outside
// the sink knows the formats: readers ask by a file's name (Lines,
// ForEachRecord, ReadRecordsAt).
type partFormat interface {
	// name is the format's output.format value and its final files'
	// extension (part-000007.NAME).
	name() string
	// lines says whether the final file is the appended JSONL itself,
	// renamed: its records' locations are byte offsets, the same as in
	// its temporary (.open). Otherwise the final file is converted from
	// the JSONL journal (.journal), its records in the journal's order,
	// located by row.
	lines() bool
	// convert writes the final file from the finished JSONL journal (a
	// format whose lines() is false) and returns the rows it wrote; it
	// writes under a temporary name (.tmp) and renames.
	convert(journal, final string) (rows int, err error)
	// keys visits every key of a final file in order: a resume reads ids
	// only.
	keys(path string, visit func(k Key, row int) error) (int, error)
	// records calls fn for every record of a final file, in order, with
	// where it is (a Parquet row has no Span: zero).
	records(path string, fn func(rec *Record, at Span) error) error
	// readAt calls fn(i, rec) for the record at locs[i] of a final file,
	// for i in order (locs[order[k]] ascending).
	readAt(path string, locs []int64, order []int, fn func(i int, rec *Record) error) error
}

// formats are the output formats by name; each format's file registers
// its own.
var formats = map[string]partFormat{}

func register(f partFormat) { formats[f.name()] = f }

// formatOf is the format a data file is read in, by its name: a
// temporary being appended (.open, .journal) is JSONL whatever it becomes;
// a final part is its extension's format, and a name of none is read as
// JSONL.
func formatOf(path string) partFormat {
	name := filepath.Base(path)
	if strings.HasSuffix(name, SuffixOpen) || strings.HasSuffix(name, SuffixJournal) {
		return formats[FormatJSONL]
	}
	if f, ok := formats[strings.TrimPrefix(filepath.Ext(name), ".")]; ok {
		return f
	}
	return formats[FormatJSONL]
}

// Lines reports whether the records of the data file name (a final part,
// or a temporary being appended) are JSON lines. Then a record's location
// (its Span.Offset, what ReadRecordsAt and ReadLinesAt take) is the byte
// offset of its line; a file being appended reads on from the end of its
// last complete line; and the final part a temporary becomes is that same
// file renamed, its records at the same offsets. Otherwise a location is
// a row (0-based, in file order), and the final part was converted from
// its journal, whose lines are its rows in order.
func Lines(name string) bool { return formatOf(name).lines() }

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
	if formats[f].lines() {
		return SuffixOpen
	}
	return SuffixJournal
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
