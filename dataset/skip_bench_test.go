package dataset

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// BenchmarkResumeRead reads a 100,000-row dataset as a resume of a finished
// job does (every row's keys done: SetSkip passes each over) and as a fresh
// run does (every row decoded), for JSONL with row-index ids and with an id
// column, and for Parquet with row-index ids and with an id column.
func BenchmarkResumeRead(b *testing.B) {
	const rows = 100_000
	dir := b.TempDir()
	prompt := strings.Repeat("word ", 40)
	var jl strings.Builder
	for i := range rows {
		fmt.Fprintf(&jl, `{"uid":"q-%08x","prompt":%q}`+"\n", i*7919, prompt)
	}
	jsonl := filepath.Join(dir, "d.jsonl")
	if err := os.WriteFile(jsonl, []byte(jl.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	type row struct {
		UID    string `parquet:"uid"`
		Prompt string `parquet:"prompt"`
	}
	pq := filepath.Join(dir, "d.parquet")
	f, err := os.Create(pq)
	if err != nil {
		b.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f, parquet.Compression(&parquet.Zstd))
	for i := range rows {
		if _, err := w.Write([]row{{UID: fmt.Sprintf("q-%08x", i*7919), Prompt: prompt}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"jsonl-index", Options{Selection: Selection{Path: jsonl, Format: FormatPrompt, PromptField: "prompt"}}},
		{"jsonl-id_field", Options{Selection: Selection{Path: jsonl, Format: FormatPrompt, PromptField: "prompt", IDField: "uid"}}},
		{"parquet-index", Options{Selection: Selection{Path: pq, Format: FormatPrompt, PromptField: "prompt"}}},
		{"parquet-id_field", Options{Selection: Selection{Path: pq, Format: FormatPrompt, PromptField: "prompt", IDField: "uid"}}},
	} {
		for _, skipAll := range []bool{false, true} {
			name := tc.name + "/decode"
			if skipAll {
				name = tc.name + "/skip"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					r, err := Open(tc.opts)
					if err != nil {
						b.Fatal(err)
					}
					if skipAll {
						r.SetSkip(func(string, int64, bool) bool { return true })
					}
					n := 0
					for {
						_, err := r.Next()
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						n++
					}
					r.Close()
					if want := map[bool]int{false: rows, true: 0}[skipAll]; n != want {
						b.Fatalf("%d prompts, want %d", n, want)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
			})
		}
	}
}
