package audit

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// The directories these tests audit are written by the real sink, through
// its exported API only: what a run leaves is what the audit must read.

// testJob is a job as its owner would encode it: the sink only stores it.
var testJob = sink.JobRecord{
	Spec:    json.RawMessage(`{"sampling":{"model":"Qwen/Qwen3-8B","temperature":0.6}}`),
	Hash:    "5e1f0a11",
	Version: "test",
	Config:  map[string]any{"concurrency": 200},
}

func testOptions(dir, format string) sink.Options {
	return sink.Options{
		Dir:          dir,
		Format:       format,
		PartSize:     10,
		SyncInterval: 0,
		Job:          testJob,
	}
}

// testRecord is a record with every field set, including characters JSON
// escapes and a multi-turn message list.
func testRecord(i int) *sink.Record {
	r := &sink.Record{
		ID:     strconv.Itoa(i),
		Sample: i % 2,
		Source: "math",
		Messages: []chat.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: fmt.Sprintf("question %d: is <b> & \"c\" \n ok?", i)},
		},
		Reasoning:        strings.Repeat("let me think. ", 5+i%7),
		Content:          fmt.Sprintf("answer %d ✓", i),
		FinishReason:     "stop",
		Model:            "Qwen/Qwen3-8B",
		PromptTokens:     12 + i,
		CompletionTokens: 100 + i,
		LatencyMS:        1234.5,
		TTFTMS:           56.25,
		Attempts:         1 + i%3,
		CreatedAt:        time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(),
	}
	if i%3 == 0 {
		// A whole conversation: two answered turns, nested in Parquet.
		r.Turns = []sink.Turn{
			{Reasoning: "first thought", Content: "first answer", FinishReason: "stop", PromptTokens: 5, CompletionTokens: 40},
			{Reasoning: r.Reasoning, Content: r.Content, FinishReason: "stop", PromptTokens: 7 + i, CompletionTokens: 60 + i},
		}
	}
	return r
}

// benchRecord is the size of a typical reasoning answer: ~3 KB of
// reasoning, ~1 KB of content.
func benchRecord(i int) *sink.Record {
	r := testRecord(i)
	r.Sample = 0
	r.Reasoning = strings.Repeat("Let me check the second case again. ", 85)
	r.Content = strings.Repeat("The answer is 42. ", 56)
	return r
}

func mustOpen(t testing.TB, opts sink.Options) *sink.Sink {
	t.Helper()
	s, err := sink.Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func writeRange(t testing.TB, s *sink.Sink, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Write(testRecord(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// crashed returns what kill -9 of the run writing s would leave of its
// directory dir: a copy taken after a Flush, with the temporaries (.open,
// .journal) as they are, the manifest not rewritten and the run not ended.
// s is then closed, in dir alone. It also returns the path of the copy's
// part being filled.
func crashed(t testing.TB, s *sink.Sink, dir string) (copied, filling string) {
	t.Helper()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	copied = t.TempDir()
	copyDir(t, dir, copied)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(copied, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if p, ok := sink.ParsePart(e.Name()); ok && (p.Suffix == sink.SuffixOpen || p.Suffix == sink.SuffixJournal) {
			if filling != "" {
				t.Fatalf("two shards being filled: %s and %s", filling, e.Name())
			}
			filling = filepath.Join(copied, "data", e.Name())
		}
	}
	if filling == "" {
		t.Fatal("no shard being filled")
	}
	return copied, filling
}

// copyDir copies the directory src into the empty dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fileHashes is every file under dir with its bytes, to prove the audit
// wrote nothing.
func fileHashes(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustAudit audits dir and fails the test when that errs or changes a
// byte of it.
func mustAudit(t testing.TB, dir string) *Audit {
	t.Helper()
	before := fileHashes(t, dir)
	a, err := Dir(dir)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if after := fileHashes(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the audit changed the directory:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	return a
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func putFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t testing.TB, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, to, string(data))
}

func mustJSON(t testing.TB, rec *sink.Record) string {
	t.Helper()
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(line)
}

// has reports whether the audit's sorted keys hold k, read in full (the
// audit keeps no lookup of its keys); it checks they come in order.
func has(t *testing.T, a *Audit, k sink.Key) bool {
	t.Helper()
	found := false
	var prev *sink.Key
	err := a.EachKey(func(got sink.Key) bool {
		if prev != nil && sink.CompareKeys(*prev, got) >= 0 {
			t.Fatalf("EachKey: %v after %v, not in order or repeated", got, *prev)
		}
		prev = &got
		found = found || got == k
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
