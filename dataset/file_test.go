package dataset

import (
	"strings"
	"testing"
)

// TestSupportedFile: the answer a remote dataset chooses its files by is the
// reader's own, so that it never fetches a file Open would refuse.
func TestSupportedFile(t *testing.T) {
	tests := []struct {
		name    string
		parquet bool
		err     string // substring of the error; "" for none
	}{
		{"data/train-00000-of-00001.parquet", true, ""},
		{"DATA.PARQUET", true, ""},
		{"rows.jsonl", false, ""},
		{"rows.ndjson", false, ""},
		{"rows.json", false, ""},
		{"rows.jsonl.gz", false, ""},
		{"rows.json.zst", false, ""},
		{"x.parquet.gz", false, "x.parquet.gz: compressed parquet files are not supported"},
		{"README.md", false, "README.md: unsupported file type"},
	}
	for _, tt := range tests {
		parquet, err := SupportedFile(tt.name)
		if parquet != tt.parquet {
			t.Errorf("SupportedFile(%q) parquet = %v, want %v", tt.name, parquet, tt.parquet)
		}
		if (err != nil) != (tt.err != "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("SupportedFile(%q) error = %v, want %q", tt.name, err, tt.err)
		}
		if _, openErr := openSource(tt.name); tt.err != "" && (openErr == nil || openErr.Error() != err.Error()) {
			t.Errorf("Open refuses %q with %v, SupportedFile with %v", tt.name, openErr, err)
		}
	}
}
