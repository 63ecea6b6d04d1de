package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// writeFile writes data to dir/name, compressing by the name's suffix, and
// returns the path.
func writeFile(t testing.TB, dir, name, data string) string {
	t.Helper()
	var b bytes.Buffer
	switch filepath.Ext(name) {
	case ".gz":
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(data))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	case ".zst":
		zw, err := zstd.NewWriter(&b)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write([]byte(data))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		b.WriteString(data)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readAll reads every prompt of opts and the rows skipped on the way; it fails
// the test on any error but io.EOF.
func readAll(t testing.TB, opts Options) ([]Prompt, []*RowError) {
	t.Helper()
	var skipped []*RowError
	opts.OnSkip = func(e *RowError) { skipped = append(skipped, e) }
	r, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()
	var out []Prompt
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next after %d prompts: %v", len(out), err)
		}
		out = append(out, p)
	}
	if got := r.Skipped(); got != int64(len(skipped)) {
		t.Errorf("Skipped() = %d, OnSkip called %d times", got, len(skipped))
	}
	return out, skipped
}

func ids(ps []Prompt) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// sharegptLine is a ShareGPT row; turns alternate from and value.
func sharegptLine(source string, turns ...string) string {
	var b bytes.Buffer
	b.WriteString(`{"conversations":[`)
	for i := 0; i+1 < len(turns); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"from":` + quote(turns[i]) + `,"value":` + quote(turns[i+1]) + `}`)
	}
	b.WriteString(`],"source":` + quote(source) + "}")
	return b.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
