package generator

// The batch mode against a fake Files and Batch API in front of the mock:
// every row answered once through the sink, none submitted twice, across a
// run stopped while its batches run and a creation whose answer was lost.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/job"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// fakeBatches is OpenAI's /v1/files and /v1/batches over a chat handler:
// a batch completes at the first GET once release is closed.
type fakeBatches struct {
	chat    http.Handler
	release chan struct{}
	// loseCreate: the first creation is made, and its answer is a 500.
	loseCreate bool

	mu        sync.Mutex
	files     map[string][]byte
	batches   []*batch.Batch
	submitted map[string]int // custom_id: times in a created batch
	created   int
}

func (f *fakeBatches) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.URL.Path
	switch {
	case r.Method == "POST" && p == "/v1/files":
		file, _, err := r.FormFile("file")
		if err != nil || r.FormValue("purpose") != "batch" {
			http.Error(w, "bad upload", 400)
			return
		}
		b, _ := io.ReadAll(file)
		id := fmt.Sprintf("file-%d", len(f.files)+1)
		f.files[id] = b
		_ = json.NewEncoder(w).Encode(batch.File{ID: id, Bytes: int64(len(b))})
	case r.Method == "POST" && p == "/v1/batches":
		var req struct {
			InputFileID string            `json:"input_file_id"`
			Metadata    map[string]string `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		in, ok := f.files[req.InputFileID]
		if !ok {
			http.Error(w, "no such file", 400)
			return
		}
		f.created++
		for line := range bytes.Lines(in) {
			var l struct {
				CustomID string `json:"custom_id"`
			}
			_ = json.Unmarshal(line, &l)
			f.submitted[l.CustomID]++
		}
		b := &batch.Batch{ID: fmt.Sprintf("batch_%d", len(f.batches)+1), Status: "in_progress", InputFileID: req.InputFileID, Metadata: req.Metadata}
		f.batches = append(f.batches, b)
		if f.loseCreate {
			f.loseCreate = false
			http.Error(w, "lost", 500)
			return
		}
		_ = json.NewEncoder(w).Encode(b)
	case r.Method == "GET" && p == "/v1/batches":
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": f.batches, "has_more": false})
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/batches/"):
		for _, b := range f.batches {
			if b.ID == strings.TrimPrefix(p, "/v1/batches/") {
				f.advance(b)
				_ = json.NewEncoder(w).Encode(b)
				return
			}
		}
		http.Error(w, "no such batch", 404)
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/files/") && strings.HasSuffix(p, "/content"):
		b, ok := f.files[strings.TrimSuffix(strings.TrimPrefix(p, "/v1/files/"), "/content")]
		if !ok {
			http.Error(w, "no such file", 404)
			return
		}
		_, _ = w.Write(b)
	default:
		f.chat.ServeHTTP(w, r)
	}
}

// advance completes b once released: each line asked of the chat handler.
func (f *fakeBatches) advance(b *batch.Batch) {
	select {
	case <-f.release:
	default:
		return
	}
	if b.Status != "in_progress" {
		return
	}
	var out bytes.Buffer
	for line := range bytes.Lines(f.files[b.InputFileID]) {
		var l struct {
			CustomID string          `json:"custom_id"`
			Body     json.RawMessage `json:"body"`
		}
		_ = json.Unmarshal(line, &l)
		rec := httptest.NewRecorder()
		f.chat.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(l.Body)))
		_ = json.NewEncoder(&out).Encode(map[string]any{"id": "req", "custom_id": l.CustomID,
			"response": map[string]any{"status_code": rec.Code, "request_id": "r", "body": json.RawMessage(rec.Body.Bytes())}, "error": nil})
		b.Counts.Completed++
	}
	b.OutputFileID = fmt.Sprintf("file-out-%s", b.ID)
	f.files[b.OutputFileID] = out.Bytes()
	b.Status = "completed"
}

func batchSetup(t *testing.T, url, dir string, rows int) Setup {
	data := filepath.Join(dir, "rows.jsonl")
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d"}]}`+"\n", i)
	}
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return Setup{
		Job: job.Job{Selection: dataset.Selection{Path: data, Format: "messages"},
			Sampling: job.Sampling{MaxTokens: 8, Samples: 1}},
		BaseURL: url + "/v1", Concurrency: 30, Dir: filepath.Join(dir, "out"), Format: "jsonl", PartSize: 100, Version: "test",
		Stats: runstats.NewStats(nil), Retry: pool.RetryPolicy{MaxAttempts: 1},
		Batch: &batch.Options{MaxRequests: 10, MaxBytes: 1 << 20, PollInterval: time.Millisecond, Window: "24h"},
	}
}

func runBatch(t *testing.T, ctx context.Context, s Setup) Result {
	t.Helper()
	r, err := Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, Hooks{Final: func() runstats.ProgressRecord { return runstats.NewProgressRecord(s.Stats.Snapshot(), nil) }})
	if err != nil && ctx.Err() == nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func recordCount(t *testing.T, dir string) map[string]int {
	t.Helper()
	got := map[string]int{}
	parts, _ := filepath.Glob(filepath.Join(dir, "data", "*.jsonl"))
	for _, p := range parts {
		if err := sink.ForEachRecord(p, func(rec *sink.Record, _ sink.Span) error {
			got[rec.ID]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func checkOnce(t *testing.T, f *fakeBatches, dir string, rows int) {
	t.Helper()
	got := recordCount(t, dir)
	if len(got) != rows {
		t.Errorf("%d ids on disk, want %d", len(got), rows)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("id %s written %d times", id, n)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submitted) != rows {
		t.Errorf("%d custom_ids submitted, want %d", len(f.submitted), rows)
	}
	for id, n := range f.submitted {
		if n != 1 {
			t.Errorf("custom_id %s submitted %d times", id, n)
		}
	}
}

func newFake(t *testing.T) (*fakeBatches, *httptest.Server) {
	f := &fakeBatches{chat: mockserver.New(mockserver.Options{Seed: 1}), release: make(chan struct{}),
		files: map[string][]byte{}, submitted: map[string]int{}}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts
}

// TestBatchRun: 25 rows in batches of 10 are three batches, every row
// one record, each request in one batch, and the ledger says collected.
func TestBatchRun(t *testing.T) {
	t.Parallel()
	f, ts := newFake(t)
	close(f.release)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 25)
	res := runBatch(t, context.Background(), s)
	if res.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, want done (%+v)", res.Outcome, res)
	}
	checkOnce(t, f, s.Dir, 25)
	b, err := os.ReadFile(filepath.Join(s.Dir, batch.LedgerName))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"state": "collected"`); n != 3 || f.created != 3 {
		t.Errorf("%d batches collected, %d created, want 3 and 3:\n%s", n, f.created, b)
	}
}

// TestBatchResume: a run stopped while its batches run server-side (one
// of them created with its answer lost) leaves them in the ledger; the
// resume finds the unrecorded one by its metadata, creates none again,
// and collects them all.
func TestBatchResume(t *testing.T) {
	t.Parallel()
	f, ts := newFake(t)
	f.loseCreate = true
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 25)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for { // stop once all three batches exist
			f.mu.Lock()
			n := len(f.batches)
			f.mu.Unlock()
			if n == 3 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	runBatch(t, ctx, s)
	if got := recordCount(t, s.Dir); len(got) != 0 {
		t.Fatalf("%d records before any batch ended", len(got))
	}
	close(f.release)
	res := runBatch(t, context.Background(), batchSetup(t, ts.URL, dir, 25))
	if res.Outcome != OutcomeDone {
		t.Fatalf("resume: outcome %s, want done", res.Outcome)
	}
	checkOnce(t, f, s.Dir, 25)
	if f.created != 3 {
		t.Errorf("%d batches created, want 3", f.created)
	}
}
