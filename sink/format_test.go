package sink

import "testing"

// TestLines: what a reader is told of a data file by its name. A
// temporary being appended is lines whatever it becomes; a final part is
// its format's.
func TestLines(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"part-000001.jsonl":           true,
		"part-000001.jsonl.open":      true,
		"data/part-000001.jsonl":      true,
		"part-000001.parquet.journal": true,
		"part-000001.parquet":         false,
		"/x/data/part-000001.parquet": false,
		"export.parquet":              false,
		"notes.txt":                   true,
	} {
		if got := Lines(name); got != want {
			t.Errorf("Lines(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestParsePartKnowsTheFormats: a name of an extension no format has is
// not the sink's, and each format's temporary is its own.
func TestParsePartKnowsTheFormats(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"part-000001.jsonl":           true,
		"part-000001.jsonl.open":      true,
		"part-000001.jsonl.journal":   false,
		"part-000001.parquet.journal": true,
		"part-000001.parquet.tmp":     true,
		"part-000001.parquet.open":    false,
		"part-000001.csv":             false,
		"part-000001.csv.open":        false,
	} {
		if _, got := ParsePart(name); got != ok {
			t.Errorf("ParsePart(%q): %v, want %v", name, got, ok)
		}
	}
	if got := Formats(); len(got) != 2 || got[0] != FormatJSONL || got[1] != FormatParquet {
		t.Errorf("Formats() = %v", got)
	}
}
