package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// sliceSource yields prompts with ids 0..n-1 (and an optional extra id).
type sliceSource struct {
	mu      sync.Mutex
	prompts []dataset.Prompt
	next    int
}

func newSliceSource(ids ...string) *sliceSource {
	s := &sliceSource{}
	for i, id := range ids {
		s.prompts = append(s.prompts, dataset.Prompt{
			ID: id, Index: int64(i), Source: "test",
			Messages: []chat.Message{{Role: "user", Content: "prompt " + id}},
		})
	}
	return s
}

func numberedIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return ids
}

func (s *sliceSource) Next() (dataset.Prompt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.prompts) {
		return dataset.Prompt{}, io.EOF
	}
	p := s.prompts[s.next]
	s.next++
	return p, nil
}

// countingServer answers chat completions in vLLM's plain shape and records
// how many requests are in flight at once. A request is counted out before
// its response is written, so a client can never observe a freed slot the
// server still counts.
type countingServer struct {
	inFlight, peak, requests, completed atomic.Int64
	// hook runs for each request after it is counted in; it may block.
	hook func(prompt string)
}

func (c *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"test-model","object":"model"}]}`)
		return
	}
	var body struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, `{"object":"error","message":"bad body","code":400}`, http.StatusBadRequest)
		return
	}
	c.requests.Add(1)
	n := c.inFlight.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	prompt := body.Messages[len(body.Messages)-1].Content
	if c.hook != nil {
		c.hook(prompt)
	}
	resp := fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"test-model",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"answer to %s","reasoning":"thinking about %s"},`+
		`"logprobs":null,"finish_reason":"stop","stop_reason":null}],`+
		`"usage":{"prompt_tokens":5,"total_tokens":12,"completion_tokens":7}}`, prompt, prompt)
	c.inFlight.Add(-1)
	c.completed.Add(1)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, resp)
}

func testOptions(n int) Options {
	return Options{
		Concurrency: n, Sampling: job.Sampling{Model: "test-model", MaxTokens: 64, Temperature: 0, TopP: 1, Samples: 1},
		Retry:        RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		SyncInterval: 50 * time.Millisecond,
	}
}

func openSink(t *testing.T, dir string) *sink.Sink {
	t.Helper()
	s, err := sink.Open(sink.Options{
		Dir: dir, Format: "jsonl", PartSize: 100, SyncInterval: 20 * time.Millisecond,
		Job: sink.JobRecord{Version: "test", Hash: "test"},
	})
	if err != nil {
		t.Fatalf("open sink: %v", err)
	}
	return s
}

// shardRecords reads every record of dir's data shards, final and open,
// in file order.
func shardRecords(t *testing.T, dir string) []sink.Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "data", "part-*"))
	var out []sink.Record
	for _, f := range files {
		if err := sink.ForEachRecord(f, func(r *sink.Record, _ sink.Span) error {
			out = append(out, *r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// readIDs returns how many times each id appears in the final and open
// JSONL shards of dir, failing on an incomplete record.
func readIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, r := range shardRecords(t, dir) {
		if r.Reasoning == "" || r.Content == "" || r.FinishReason != "stop" {
			t.Fatalf("incomplete record %+v", r)
		}
		seen[r.ID]++
	}
	return seen
}

// TestPoolKeepsExactlyNInFlight: a server holds one request open while at
// least 3N others complete; the pool refills every freed slot at once, so
// the server sees exactly N in flight and never more.
func TestPoolKeepsExactlyNInFlight(t *testing.T) {
	const n = 200
	release := make(chan struct{})
	var heldDuring atomic.Int64 // completions observed while "hold" was open
	var arrived sync.WaitGroup
	arrived.Add(n)
	var first atomic.Int64
	srv := &countingServer{}
	srv.hook = func(prompt string) {
		// A barrier for the first N so that the peak is reached whatever the
		// scheduling: if the pool started fewer than N at once, this hangs
		// and the test times out; if it started more, peak > N.
		if first.Add(1) <= n {
			arrived.Done()
			arrived.Wait()
		}
		if prompt == "prompt hold" {
			before := srv.completed.Load()
			select {
			case <-release:
			case <-time.After(30 * time.Second): // the assertion below reports it
			}
			heldDuring.Store(srv.completed.Load() - before)
			return
		}
		time.Sleep(time.Millisecond)
		if srv.completed.Load() >= 3*n+n/2 {
			select {
			case <-release:
			default:
				close(release)
			}
		}
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	ids := append([]string{"hold"}, numberedIDs(4*n)...)
	dir := t.TempDir()
	out := openSink(t, dir)
	client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: n})
	eng, err := New(client, runstats.NewStats(nil), testOptions(n))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(ids...), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if got := srv.peak.Load(); got != n {
		t.Errorf("peak concurrency at the server = %d, want exactly %d", got, n)
	}
	if got := heldDuring.Load(); got < 3*n {
		t.Errorf("while one request was held, %d others completed; want at least %d (a slot must not wait for its neighbours)", got, 3*n)
	}
	if sum.Written != len(ids) {
		t.Errorf("written = %d, want %d", sum.Written, len(ids))
	}
	seen := readIDs(t, dir)
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("id %s present %d times, want 1", id, seen[id])
		}
	}
}

// slowSink takes each record slowly (a disk busy with fsyncs), noting the
// most requests the stats said were in flight at any write.
type slowSink struct {
	discardSink
	stats *runstats.Stats
	peak  int64
}

func (s *slowSink) Write(*sink.Record) error {
	s.peak = max(s.peak, s.stats.Snapshot().InFlight)
	time.Sleep(2 * time.Millisecond)
	return nil
}

// TestInFlightIsSlotsHeld: in flight counts the requests holding a slot, at
// most the concurrency, also while answers wait for a slow writer: a slot
// that handed its answer over is free, and its successor must not be counted
// twice ("201 in flight" at concurrency 200).
func TestInFlightIsSlotsHeld(t *testing.T) {
	const n = 4
	srv := &countingServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	stats := runstats.NewStats(nil)
	out := &slowSink{stats: stats}
	eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: n}), stats, testOptions(n))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := eng.Run(context.Background(), newSliceSource(numberedIDs(100)...), out)
	if err != nil || sum.Written != 100 {
		t.Fatalf("run: %v, %d written", err, sum.Written)
	}
	if out.peak > n {
		t.Errorf("the stats said %d in flight at concurrency %d", out.peak, n)
	}
	if got := stats.Snapshot().InFlight; got != 0 {
		t.Errorf("in flight after the run = %d, want 0", got)
	}
}

// TestResumeWritesEveryIDOnce stops a run part-way (both gracefully and by
// cancellation), resumes, and checks every id is on disk exactly once and
// the server was asked at most rows + N times in all.
func TestResumeWritesEveryIDOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"drain", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			const rows, n = 1000, 50
			srv := &countingServer{}
			srv.hook = func(string) { time.Sleep(2 * time.Millisecond) }
			ts := httptest.NewServer(srv)
			defer ts.Close()
			dir := t.TempDir()
			client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: n})

			// First run: stop once 40% is answered.
			out := openSink(t, dir)
			eng, _ := New(client, runstats.NewStats(nil), testOptions(n))
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for srv.completed.Load() < rows*4/10 {
					time.Sleep(time.Millisecond)
				}
				if mode == "drain" {
					eng.Drain()
				} else {
					cancel()
				}
			}()
			sum1, err := eng.Run(ctx, newSliceSource(numberedIDs(rows)...), out)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			written := len(readIDs(t, dir))
			if written < rows*2/10 || written > rows*8/10 {
				t.Fatalf("first run wrote %d of %d; the test wants a stop between 20%% and 80%%", written, rows)
			}
			if sum1.Written != written {
				t.Errorf("first run reported %d written, %d on disk", sum1.Written, written)
			}

			// Second run: completes.
			out = openSink(t, dir)
			eng, _ = New(client, runstats.NewStats(nil), testOptions(n))
			sum2, err := eng.Run(context.Background(), newSliceSource(numberedIDs(rows)...), out)
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			if sum2.Skipped != int64(written) {
				t.Errorf("second run skipped %d, want the %d already written", sum2.Skipped, written)
			}
			seen := readIDs(t, dir)
			for _, id := range numberedIDs(rows) {
				if seen[id] != 1 {
					t.Errorf("id %s present %d times, want 1", id, seen[id])
				}
			}
			if len(seen) != rows {
				t.Errorf("%d distinct ids on disk, want %d", len(seen), rows)
			}
			if got := srv.requests.Load(); got > rows+n {
				t.Errorf("server received %d requests over both runs, want at most rows+N = %d", got, rows+n)
			}
		})
	}
}

// failingSink takes n records, then every write fails (a full disk).
type failingSink struct {
	discardSink
	n int
}

func (f *failingSink) Write(*sink.Record) error {
	if f.n == 0 {
		return errors.New("no space left on device")
	}
	f.n--
	return nil
}

// TestSinkFailureStopsTheRun: when records can no longer be written, the
// run stops at once with the sink's error, cancels what is in flight instead
// of asking the server for answers nobody can keep, and counts as done only
// what was written.
func TestSinkFailureStopsTheRun(t *testing.T) {
	srv := &countingServer{hook: func(string) { time.Sleep(time.Millisecond) }}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	stats := runstats.NewStats(nil)
	eng, _ := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 8}), stats, testOptions(8))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(numberedIDs(1000)...), &failingSink{n: 10})
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Run error = %v, want the sink's error", err)
	}
	snap := stats.Snapshot()
	if sum.Written != 10 || snap.Done != 10 || snap.InFlight != 0 {
		t.Errorf("written %d, counted done %d, in flight %d; want 10, 10, 0", sum.Written, snap.Done, snap.InFlight)
	}
	if got := srv.requests.Load(); got > 10+1+8+8 {
		t.Errorf("server asked %d times after the sink failed at record 11; want the run to stop", got)
	}
}

// TestEngineRunsOnce: an Engine's drain signal and stats belong to its one
// Run; a second Run says so instead of running with a drained Engine.
func TestEngineRunsOnce(t *testing.T) {
	eng, err := New(nil, nil, Options{Concurrency: 1, Sampling: job.Sampling{Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), newSliceSource(), discardSink{}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), newSliceSource(), discardSink{}); err == nil || !strings.Contains(err.Error(), "runs once") {
		t.Errorf("second Run = %v, want an error saying an Engine runs once", err)
	}
}

// TestRepeatedOwnIDsAmongIndexIDs: without an id column a row's id is its
// index, unless the row names its own (a batch request's custom_id). Such an
// id is asked once however it repeats: another custom_id, or a plain row's
// index before or after it. A row model other than the job's is noted once.
func TestRepeatedOwnIDsAmongIndexIDs(t *testing.T) {
	srv := &countingServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	dir := t.TempDir()
	client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 4})
	// index: id
	rows := []string{
		0: "0", 1: "1", 2: "2", // plain rows
		3: "1",         // a custom_id spelling row 1's index
		4: "x", 5: "x", // a repeated custom_id
		6:  "6",  // plain
		7:  "7",  // a custom_id equal to its own index: the same key
		8:  "9",  // a custom_id spelling a later row's index
		9:  "9",  // that plain row
		10: "01", // not how an index is written: its own id
	}
	src := newSliceSource(rows...)
	for i := range src.prompts {
		src.prompts[i].Model = "gpt-4o-mini"
		src.prompts[i].Location = fmt.Sprintf("b.jsonl:%d", i+1)
	}
	var log strings.Builder
	opts := testOptions(4)
	opts.UniqueIDs, opts.Log = true, &log
	out := openSink(t, dir)
	eng, _ := New(client, runstats.NewStats(nil), opts)
	sum, err := eng.Run(context.Background(), src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	seen := readIDs(t, dir)
	want := []string{"0", "1", "2", "x", "6", "7", "9", "01"}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("id %s written %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) || sum.Written != len(want) || sum.Duplicates != 3 {
		t.Errorf("ids on disk %v, summary %+v; want %v and 3 duplicates", seen, sum, want)
	}
	if got := srv.requests.Load(); got != int64(len(want)) {
		t.Errorf("server asked %d times, want %d", got, len(want))
	}
	if n := strings.Count(log.String(), "note: "); n != 1 || !strings.Contains(log.String(), `model "gpt-4o-mini" (first at b.jsonl:1)`) {
		t.Errorf("log %q: want one note naming the row's model and where", log.String())
	}
}

func TestRowIndex(t *testing.T) {
	for id, want := range map[string]bool{"0": true, "7": true, "18446744073709551615": false, "9223372036854775807": true, "01": false, "": false, "-1": false, "1e3": false, "+1": false} {
		if _, ok := rowIndex(id); ok != want {
			t.Errorf("rowIndex(%q) ok = %v, want %v", id, ok, want)
		}
	}
}
