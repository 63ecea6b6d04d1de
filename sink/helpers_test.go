package sink

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/chat"
)

// testJob is a job as its owner would encode it: the sink only stores it.
var testJob = JobRecord{
	Spec:    json.RawMessage(`{"sampling":{"model":"Qwen/Qwen3-8B","temperature":0.6}}`),
	Hash:    "5e1f0a11",
	Version: "test",
	Config:  map[string]any{"concurrency": 200},
}

func testOptions(dir, format string) Options {
	return Options{
		Dir:          dir,
		Format:       format,
		PartSize:     10,
		SyncInterval: 0,
		Job:          testJob,
	}
}

// testRecord is a record with every field set, including characters JSON
// escapes and a multi-turn message list.
func testRecord(i int) *Record {
	r := &Record{
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
		r.Turns = []Turn{
			{Reasoning: "first thought", Content: "first answer", FinishReason: "stop", PromptTokens: 5, CompletionTokens: 40},
			{Reasoning: r.Reasoning, Content: r.Content, FinishReason: "stop", PromptTokens: 7 + i, CompletionTokens: 60 + i},
		}
	}
	return r
}

func mustOpen(t testing.TB, opts Options) *Sink {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func writeRange(t testing.TB, s *Sink, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Write(testRecord(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// crash drops the sink as kill -9 would: bytes still in the bufio buffers
// are lost, temporaries stay, the manifest is not rewritten, and the kernel
// releases the lock.
func crash(s *Sink) {
	if s.cur != nil {
		_ = s.cur.f.Close()
	}
	if s.errFile != nil {
		_ = s.errFile.f.Close()
	}
	s.log.close()
	_ = s.lock.Close()
	s.closed = true
}

// readParts reads every final data part in full with a reader independent
// of the sink's key scan (encoding/json, parquet-go's generic reader) and
// returns the records in part order.
func readParts(t testing.TB, dir string) []Record {
	t.Helper()
	dataDir := filepath.Join(dir, "data")
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for _, e := range entries {
		path := filepath.Join(dataDir, e.Name())
		switch filepath.Ext(e.Name()) {
		case ".jsonl":
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				var r Record
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				out = append(out, r)
			}
			f.Close()
		case ".parquet":
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r := parquet.NewGenericReader[Record](f)
			rows := make([]Record, r.NumRows())
			n, err := r.Read(rows)
			if n != len(rows) {
				t.Fatalf("%s: read %d of %d rows: %v", path, n, len(rows), err)
			}
			r.Close()
			f.Close()
			out = append(out, rows...)
		}
	}
	return out
}

// assertExactlyOnce checks the property a user cares about: every wanted
// key is in the data exactly once, and nothing else is.
func assertExactlyOnce(t testing.TB, dir string, want []Key) {
	t.Helper()
	seen := map[Key]int{}
	for _, r := range readParts(t, dir) {
		seen[r.Key()]++
	}
	for _, k := range want {
		if seen[k] != 1 {
			t.Errorf("key %v present %d times, want 1", k, seen[k])
		}
		delete(seen, k)
	}
	for k, n := range seen {
		t.Errorf("unexpected key %v present %d times", k, n)
	}
}

func keysOf(from, to int) []Key {
	var ks []Key
	for i := from; i < to; i++ {
		ks = append(ks, testRecord(i).Key())
	}
	return ks
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// skip is what a run without --retry-errors passes over: done keys and
// keys that failed for good.
func skip(s *Sink, k Key) bool { return s.Done(k) || s.Failed(k) }

// fileHashes is every file under dir with its bytes, to prove what did not
// change a directory.
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

func readLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
