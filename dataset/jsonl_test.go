package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset/shape"
)

// FuzzJSONLRow feeds arbitrary bytes to the JSONL reader as the content of
// a file. Whatever the bytes, it must not panic, and every non-blank line must
// come out either as a prompt with at least one user turn located at its
// line, or as a *RowError naming the file and that line.
func FuzzJSONLRow(f *testing.F) {
	f.Add([]byte(sharegptLine("MetaMath", "human", "What is 2+2?", "gpt", "4")))
	f.Add([]byte(sharegptLine("s", "system", "S", "human", "q", "gpt", "a", "human", "q2")))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`))
	f.Add([]byte(`{"instruction":"i","input":"x"}` + "\n\n" + `{"prompt":"p","source":1.5e3}`))
	f.Add([]byte(`{"conversations":[{"from":"gpt","value":"x"}]}`))
	f.Add([]byte(`{"conversations":[{"from":"human","value":5}]}`))
	f.Add([]byte("{\"prompt\":\"\xff\xfe\"}\r\n[1,2]\n\"x\"\n{"))
	f.Add([]byte("\ufeff{\"prompt\":\"bom\"}"))
	f.Add([]byte(batchLine("r1", `{"model":"m","messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"A"}],"temperature":0,"max_tokens":5}`) + "\n" +
		batchLine("r2", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"n":2}`)))
	f.Add([]byte(`{"custom_id":"x","method":"GET","url":"/v1/embeddings","body":{"messages":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var skipped []*RowError
		r := &Reader{
			opts: Options{OnBadRow: OnBadRowSkip, Selection: Selection{Shard: Shard{Count: 1}}, OnSkip: func(e *RowError) { skipped = append(skipped, e) }},
			conv: shape.Converter{Format: FormatAuto, SourceField: "source"},
		}
		br := bufio.NewReader(bytes.NewReader(data))
		if err := skipBOM(br); err != nil {
			t.Fatal(err)
		}
		r.cur, r.curPath = newJSONL("fuzz.jsonl", br, func() error { return nil }), "fuzz.jsonl"

		var prompts int64
		for {
			p, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			prompts++
			if batchRow(data, p.Location) {
				// A batch row is a whole request: its turns are sent as given.
				if len(p.Messages) == 0 {
					t.Fatalf("request row without turns: %+v", p)
				}
				continue
			}
			users := 0
			for _, m := range p.Messages {
				if m.Role == "user" {
					users++
				}
				if m.Role == "assistant" {
					t.Fatalf("prompt holds an assistant turn: %q", p.Messages)
				}
			}
			if users == 0 {
				t.Fatalf("prompt without a user turn: %q", p.Messages)
			}
			if !strings.HasPrefix(p.Location, "fuzz.jsonl:") || p.Location == "fuzz.jsonl:0" {
				t.Fatalf("location %q", p.Location)
			}
		}
		for _, e := range skipped {
			if e.File != "fuzz.jsonl" || e.Line < 1 || !strings.HasPrefix(e.Error(), "fuzz.jsonl:") {
				t.Fatalf("row error does not name file:line: %+v %q", e, e.Error())
			}
		}
		// Every non-blank line is a row: none lost, none doubled.
		lr := lineReader{br: bufio.NewReader(bytes.NewReader(data))}
		skipBOM(lr.br)
		var lines int64
		for {
			if _, err := lr.next(); err != nil {
				break
			}
			lines++
		}
		if prompts+int64(len(skipped)) != lines || r.index != lines {
			t.Fatalf("%d prompts + %d bad rows, index %d, for %d non-blank lines", prompts, len(skipped), r.index, lines)
		}
	})
}

// benchFile writes n copies of the sample's rows into one JSONL file.
func benchFile(b *testing.B, copies int) (string, int) {
	sample, err := os.ReadFile(filepath.Join("..", "examples", "data", "sample.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "bench.jsonl")
	if err := os.WriteFile(path, bytes.Repeat(sample, copies), 0o644); err != nil {
		b.Fatal(err)
	}
	return path, copies * bytes.Count(sample, []byte("\n"))
}

// BenchmarkJSONL reads open-perfectblend-shaped rows; one op is one prompt.
func BenchmarkJSONL(b *testing.B) {
	path, _ := benchFile(b, 10)
	st, _ := os.Stat(path)
	b.ReportAllocs()
	b.ResetTimer()
	r, err := Open(Options{Selection: Selection{Path: path}, OnBadRow: "fail"})
	if err != nil {
		b.Fatal(err)
	}
	var rows int64
	for b.Loop() {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			r.Close()
			if r, err = Open(Options{Selection: Selection{Path: path}, OnBadRow: "fail"}); err != nil {
				b.Fatal(err)
			}
			_, err = r.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
		rows++
	}
	r.Close()
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.SetBytes(st.Size() / 3000)
}

// BenchmarkCount is the progress total of a JSONL file, per row.
func BenchmarkCount(b *testing.B) {
	path, n := benchFile(b, 10)
	b.ReportAllocs()
	for b.Loop() {
		if c, err := Count(Options{Selection: Selection{Path: path}}); err != nil || c != int64(n) {
			b.Fatalf("Count = %d, %v", c, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
}

// batchRow says whether the line of data at loc ("fuzz.jsonl:N") is an
// OpenAI batch request, which auto reads as one.
func batchRow(data []byte, loc string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(loc, "fuzz.jsonl:"))
	lines := bytes.Split(data, []byte("\n"))
	if err != nil || n < 1 || n > len(lines) {
		return false
	}
	var r map[string]any
	if json.Unmarshal(bytes.TrimPrefix(lines[n-1], []byte("\ufeff")), &r) != nil {
		return false
	}
	return r["custom_id"] != nil && r["body"] != nil
}
