package outdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/sink"
)

// firstPass writes a finished output directory of n prompts, samples
// answers each, in format, parts of size records, as a run does.
func firstPass(t testing.TB, dir string, n, samples int, format string, size int) {
	t.Helper()
	spec := fmt.Sprintf(`{"selection":{"path":"q.jsonl","format":"auto","shard":"all"},"prompt":{},"sampling":{"model":"m","max_tokens":8,"temperature":0,"top_p":1,"n":%d}}`, samples)
	s, err := sink.Open(sink.Options{Dir: dir, Format: format, PartSize: size, Job: sink.JobRecord{Spec: json.RawMessage(spec), Hash: fmt.Sprintf("hash-n%d", samples), Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for k := range samples {
			rec := &sink.Record{
				ID: strconv.Itoa(i), Sample: k, Source: "src",
				Messages:  []chat.Message{{Role: "user", Content: fmt.Sprintf("question %d", i)}},
				Reasoning: "thought", Content: fmt.Sprintf("answer %d.%d", i, k), FinishReason: "stop", Model: "m",
				PromptTokens: 3, CompletionTokens: 4, Attempts: 1, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			}
			if err := s.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func readRows(t *testing.T, opts dataset.Options) ([]dataset.Prompt, []*dataset.RowError) {
	t.Helper()
	var bad []*dataset.RowError
	opts.OnSkip = func(e *dataset.RowError) { bad = append(bad, e) }
	opts.Outputs = Reader{}
	r, err := dataset.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []dataset.Prompt
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, bad
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
}

var judge = []chat.Message{
	{Role: "system", Content: "You grade answers."},
	{Role: "user", Content: "Q: {{(index .messages 0).content}} ({{.source}}, {{.finish_reason}}, {{.completion_tokens}} tokens)\nA: {{.content}}\nThought: {{.reasoning}}\n{{json .messages}}"},
}

// TestRecordsAreRows: each record of a first pass is one row, read once,
// its id the first pass's key, its fields what the template reads; JSONL
// and Parquet parts alike.
func TestRecordsAreRows(t *testing.T) {
	for _, tt := range []struct {
		format  string
		samples int
	}{{"jsonl", 1}, {"parquet", 1}, {"jsonl", 3}, {"parquet", 2}} {
		t.Run(fmt.Sprintf("%s n=%d", tt.format, tt.samples), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "first")
			const n = 23
			firstPass(t, dir, n, tt.samples, tt.format, 5)
			opts := dataset.Options{Selection: dataset.Selection{Path: dir}, Template: judge}
			if rows, err := dataset.Count(withReader(opts)); err != nil || rows != int64(n*tt.samples) {
				t.Errorf("Count = %d, %v; want %d", rows, err, n*tt.samples)
			}
			got, bad := readRows(t, opts)
			if len(bad) > 0 {
				t.Fatalf("bad rows: %v", bad)
			}
			seen := map[string]bool{}
			for _, p := range got {
				if seen[p.ID] {
					t.Errorf("id %s read twice", p.ID)
				}
				seen[p.ID] = true
				id, sample := p.ID, 0
				if tt.samples > 1 {
					a, b, _ := strings.Cut(p.ID, "#")
					id, sample = a, atoi(t, b)
				}
				want := fmt.Sprintf("Q: question %s (src, stop, 4 tokens)\nA: answer %s.%d\nThought: thought\n[{\"content\":\"question %s\",\"role\":\"user\"}]", id, id, sample, id)
				if len(p.Messages) != 2 || p.Messages[1].Content != want || p.Source != "src" {
					t.Errorf("row %s: %+v\nwant user turn %q", p.ID, p.Messages, want)
				}
				if !strings.Contains(p.Location, filepath.Join(dir, "data", "part-")) {
					t.Errorf("location %q", p.Location)
				}
			}
			if len(seen) != n*tt.samples {
				t.Errorf("%d rows, want %d (every key once)", len(seen), n*tt.samples)
			}
			if tt.samples > 1 && !seen["17#1"] {
				t.Errorf(`no row "17#1": with n > 1 a row's id is id#sample`)
			}
			if tt.samples == 1 && !seen["17"] {
				t.Errorf(`no row "17": with n = 1 a row's id is the first pass's id`)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func withReader(o dataset.Options) dataset.Options { o.Outputs = Reader{}; return o }

// TestSkipAndRepeat: a row SetSkip passes over is not built; the others
// keep their keys; a limit and a shard select by the row's place.
func TestSkipAndRepeat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "first")
	firstPass(t, dir, 10, 1, "jsonl", 4)
	r, err := dataset.Open(withReader(dataset.Options{Selection: dataset.Selection{Path: dir, Limit: 8, Shard: dataset.Shard{Index: 1, Count: 2}}, Template: judge}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var asked []string
	r.SetSkip(func(id string, index int64, byIndex bool) bool {
		if byIndex {
			t.Errorf("id %s offered as a row index", id)
		}
		asked = append(asked, id)
		return id == "3"
	})
	var got []string
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.ID)
	}
	if !reflect.DeepEqual(got, []string{"1", "5", "7"}) || !reflect.DeepEqual(asked, []string{"1", "3", "5", "7"}) {
		t.Errorf("rows %v after skip asked %v; want 1 5 7 of 1 3 5 7", got, asked)
	}
}

// TestStampRefuses: a directory a live run holds (named by its pid), a
// killed run's unfinished part, a part changed since written, an id_field.
func TestStampRefuses(t *testing.T) {
	t.Run("held by a live run", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		s, err := sink.Open(sink.Options{Dir: dir, Format: "jsonl", PartSize: 5, Job: sink.JobRecord{Spec: json.RawMessage(`{}`), Hash: "hash-n1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = Reader{}.Stamp(dir)
		want := fmt.Sprintf("dataset %s is being written by synthgen pid %d on ", dir, os.Getpid())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Stamp: %v\nwant %q", err, want)
		}
	})
	t.Run("held by another process", func(t *testing.T) {
		if _, err := exec.LookPath("flock"); err != nil {
			t.Skip("no flock(1)")
		}
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		// flock(1) holds the lock as another synthgen would, until it is
		// told to end (its stdin closes).
		cmd := exec.Command("flock", "-x", filepath.Join(dir, sink.LockName), "cat")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { stdin.Close(); _ = cmd.Wait() }()
		// cat echoes once flock holds the lock and ran it.
		if _, err := io.WriteString(stdin, "x\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := out.Read(make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
		if _, err := (Reader{}).Stamp(dir); err == nil || !strings.Contains(err.Error(), "is being written by synthgen pid") {
			t.Errorf("Stamp: %v", err)
		}
	})
	t.Run("killed run", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		if err := os.WriteFile(filepath.Join(dir, "data", "part-000009.jsonl.open"), []byte(`{"id":"9","sample":0}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Reader{}.Stamp(dir)
		if err == nil || !strings.Contains(err.Error(), "data/part-000009.jsonl.open is not final") {
			t.Errorf("Stamp: %v", err)
		}
	})
	t.Run("unlisted part", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		if err := os.WriteFile(filepath.Join(dir, "data", "part-000009.jsonl"), []byte(`{"id":"9","sample":0}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := (Reader{}).Stamp(dir); err == nil || !strings.Contains(err.Error(), "data/part-000009.jsonl is not in its manifest") {
			t.Errorf("Stamp: %v", err)
		}
	})
	t.Run("changed part", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		path := filepath.Join(dir, "data", "part-000000.jsonl")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), "answer 1.0", "answer 1.X", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := (Reader{}).Stamp(dir); err == nil || !strings.Contains(err.Error(), "data/part-000000.jsonl is not what was written") {
			t.Errorf("Stamp: %v", err)
		}
	})
	t.Run("id_field", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		_, err := dataset.Open(withReader(dataset.Options{Selection: dataset.Selection{Path: dir, IDField: "id"}, Template: judge}))
		if err == nil || !strings.Contains(err.Error(), "dataset.id_field \"id\" must be empty") {
			t.Errorf("Open: %v", err)
		}
	})
	t.Run("no reader", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "first")
		firstPass(t, dir, 3, 1, "jsonl", 5)
		_, err := dataset.Open(dataset.Options{Selection: dataset.Selection{Path: dir}, Template: judge})
		if err == nil || !strings.Contains(err.Error(), "package dataset/outdir has one") {
			t.Errorf("Open: %v", err)
		}
	})
}

// TestStampChanges: a first pass that grew says which part is new; the
// same directory stamps the same.
func TestStampChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "first")
	firstPass(t, dir, 7, 1, "parquet", 5)
	a, err := Reader{}.Stamp(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Reader{}.Stamp(dir)
	if err != nil || a.Identity() != b.Identity() {
		t.Fatalf("two stamps of one directory differ: %v\n%v\n%v", err, a, b)
	}
	if a.JobHash != "hash-n1" || a.Samples != 1 || len(a.Parts) != 2 || a.Records() != 7 {
		t.Errorf("stamp %+v", a)
	}
	// The first pass resumed with more rows: a part more.
	s, err := sink.Open(sink.Options{Dir: dir, Format: "parquet", PartSize: 5, Job: sink.JobRecord{Spec: json.RawMessage(`{"sampling":{"n":1}}`), Hash: "hash-n1"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 7; i < 12; i++ {
		if err := s.Write(&sink.Record{ID: strconv.Itoa(i), Content: "late", FinishReason: "stop"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Reader{}.Stamp(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity() == a.Identity() {
		t.Fatal("a grown directory stamps the same")
	}
	if got, want := c.DescribeChange(a), "data/part-000002.parquet is new (5 records)"; got != want || c.Records() != 12 {
		t.Errorf("change %q, want %q (%d records)", got, want, c.Records())
	}
}

// TestManifestName: the file that makes a directory an output directory
// to package dataset is the sink's manifest.
func TestManifestName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sink.ManifestName), []byte(`{"manifest_version":2,"shards":[],"runs":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := dataset.StampOutput(withReader(dataset.Options{Selection: dataset.Selection{Path: dir}})); !ok || err != nil {
		t.Errorf("a directory with %s is not read as an output directory: %v %v", sink.ManifestName, ok, err)
	}
}
