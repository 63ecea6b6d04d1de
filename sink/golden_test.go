package sink

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden record files under testdata/")

// TestRecordGolden pins the record's bytes, the interface users' scripts
// read (docs/reference.md, "The record"): a JSONL line and a Parquet part
// of records with tool calls in their turns and in their answer, beside
// plain ones and a whole conversation, and the Parquet schema (column
// names, lists, optional and required). A change to the record's types or
// tags (package chat's among them) shows here as a diff; -update rewrites
// the files when the record is meant to change, with docs/reference.md.
func TestRecordGolden(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "part.jsonl")
	a, err := createAppendFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		rec := testRecord(i)
		if i%2 == 1 {
			rec = toolRecord(i)
		}
		if err := a.encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	golden(t, journal, "testdata/golden/records.jsonl")
	final := filepath.Join(dir, "part.parquet")
	if _, err := convertJournal(journal, final); err != nil { // it removes the journal
		t.Fatal(err)
	}
	golden(t, final, "testdata/golden/records.parquet")
	schema := filepath.Join(dir, "schema.txt")
	if err := os.WriteFile(schema, []byte(parquet.SchemaOf(Record{}).String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	golden(t, schema, "testdata/golden/schema.txt")
}

// golden compares the file got with the golden file want, or rewrites want
// with -update.
func golden(t *testing.T, got, want string) {
	t.Helper()
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(want, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(b, w) {
		t.Errorf("%s differs from %s (%d bytes, want %d): the record's bytes changed", filepath.Base(got), want, len(b), len(w))
	}
}
