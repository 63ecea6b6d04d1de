package generator

// The batch mode against a fake Files and Batch API in front of the mock:
// every row answered once through the sink, none submitted twice, across a
// run stopped while its batches run and a creation whose answer was lost.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/batchapi"
	"github.com/synthgen/synthgen/sink"
)

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
		Batch: &batch.Options{MaxRequests: 10, MaxBytes: 1 << 20, PollInterval: time.Millisecond, Window: "24h", Settle: time.Millisecond},
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

func checkOnce(t *testing.T, m *mockserver.Server, dir string, rows int) {
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
	sub := m.Batches().Submitted()
	if len(sub) != rows {
		t.Errorf("%d custom_ids submitted, want %d", len(sub), rows)
	}
	for id, n := range sub {
		if n != 1 {
			t.Errorf("custom_id %s submitted %d times", id, n)
		}
	}
}

// created is how many batches the mock holds.
func created(t *testing.T, m *mockserver.Server) int {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/batches?limit=100", nil))
	var page struct{ Data []batch.Batch }
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatal(err)
	}
	return len(page.Data)
}

func newMock(t *testing.T) (*mockserver.Server, *httptest.Server) {
	m := mockserver.New(mockserver.Options{Seed: 1})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts
}

// TestBatchRun: 25 rows in batches of 10 are three batches, every row
// one record, each request in one batch, and the ledger says collected.
func TestBatchRun(t *testing.T) {
	t.Parallel()
	m, ts := newMock(t)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 25)
	res := runBatch(t, context.Background(), s)
	if res.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, want done (%+v)", res.Outcome, res)
	}
	checkOnce(t, m, s.Dir, 25)
	b, err := os.ReadFile(filepath.Join(s.Dir, batch.LedgerName))
	if err != nil {
		t.Fatal(err)
	}
	if n, c := strings.Count(string(b), `"state": "collected"`), created(t, m); n != 3 || c != 3 {
		t.Errorf("%d batches collected, %d created, want 3 and 3:\n%s", n, c, b)
	}
	var report struct{ Batches []runstats.BatchRecord }
	if b, err = os.ReadFile(filepath.Join(s.Dir, "report.json")); err == nil {
		err = json.Unmarshal(b, &report)
	}
	// Which batch holds the 5 left over depends on when each filled
	// (slots race on a loaded machine): three batches of 10, 10 and 5 in
	// some order, every one collected.
	var sizes []int
	for _, e := range report.Batches {
		if e.State != string(batch.StateCollected) {
			t.Errorf("report.json: batch %d is %s, want collected", e.Number, e.State)
		}
		sizes = append(sizes, e.Requests)
	}
	slices.Sort(sizes)
	if err != nil || !slices.Equal(sizes, []int{5, 10, 10}) {
		t.Errorf("report.json's batches: %+v (%v), want three of 10, 10 and 5 requests", report.Batches, err)
	}
}

// TestBatchResume: a run stopped while the server holds a creation it
// has stored, before its answer, leaves the batch in the ledger without
// its id; the resume finds it by its metadata, creates none again, and
// collects every batch.
func TestBatchResume(t *testing.T) {
	t.Parallel()
	m, ts := newMock(t)
	hold := m.Batches().HoldCreate(true)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 25)
	runUntilHeld(t, s, hold)
	if got := recordCount(t, s.Dir); len(got) != 0 {
		t.Fatalf("%d records before any batch was created", len(got))
	}
	hold.Release()
	res := runBatch(t, context.Background(), batchSetup(t, ts.URL, dir, 25))
	if res.Outcome != OutcomeDone {
		t.Fatalf("resume: outcome %s, want done", res.Outcome)
	}
	checkOnce(t, m, s.Dir, 25)
	if c := created(t, m); c != 3 {
		t.Errorf("%d batches created, want 3", c)
	}
}

// TestBatchLateCreateIsFound: a run stopped while its creations were in
// flight, which the server makes only after the resume has started (as a
// server may finish the POST of a client killed meanwhile): the resume
// waits out batch.Options.Settle before it looks for them, finds them,
// and creates none again. The late creations are made by the resume's
// clock at the settle's wait, so the order is the test's, not the
// machine's.
func TestBatchLateCreateIsFound(t *testing.T) {
	t.Parallel()
	m, ts := newMock(t)
	hold := m.Batches().HoldCreate(false) // nothing stored: the stopped run's creations are dropped
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 25)
	runUntilHeld(t, s, hold)
	// Released only once the server has seen every held creation's client
	// go: one let through would be made now, a real late creation beside
	// the test's own.
	if err := hold.WaitGone(time.Minute); err != nil {
		t.Fatal(err)
	}
	hold.Release()
	if c := created(t, m); c != 0 {
		t.Fatalf("%d batches created by the stopped run, want 0", c)
	}
	pending := uploadedNotCreated(t, s.Dir) // read before the resume uploads any of its own
	var late sync.Once
	lateMade := 0
	r := batchSetup(t, ts.URL, dir, 25)
	r.Batch.Settle = time.Hour
	r.Batch.After = func(d time.Duration) <-chan time.Time {
		if d < time.Minute {
			return time.After(d)
		}
		// The settle's wait: the stopped run's creations land now.
		late.Do(func() { lateMade = createLate(t, ts.URL, pending) })
		now := make(chan time.Time, 1)
		now <- time.Now()
		return now
	}
	if res := runBatch(t, context.Background(), r); res.Outcome != OutcomeDone {
		t.Fatalf("resume: outcome %s, want done", res.Outcome)
	}
	if lateMade == 0 {
		t.Fatal("the resume looked for the stopped run's batches without waiting for their creations to land")
	}
	checkOnce(t, m, s.Dir, 25)
	if c := created(t, m); c != 3 {
		t.Errorf("%d batches created, %d of them late, want 3", c, lateMade)
	}
}

// lateCreate is a creation the stopped run sent: its POST /batches body.
type lateCreate struct {
	number int
	body   string
}

// uploadedNotCreated is the creation of every ledger entry with a file and
// no batch id, as the stopped run sent it.
func uploadedNotCreated(t *testing.T, dir string) []lateCreate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, batch.LedgerName))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Run     string
		Batches []batch.Entry
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	var out []lateCreate
	for _, e := range l.Batches {
		if e.FileID != "" && e.BatchID == "" {
			out = append(out, lateCreate{e.Number, fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h",`+
				`"metadata":{"synthgen_run":%q,"synthgen_batch":"%d"}}`, e.FileID, l.Run, e.Number)})
		}
	}
	return out
}

// createLate makes the creations on the server, and returns how many.
func createLate(t *testing.T, base string, cs []lateCreate) int {
	for i, c := range cs {
		resp, err := http.Post(base+"/v1/batches", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Error(err)
			return i
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("late creation of batch %d: %s", c.number, resp.Status)
		}
	}
	return len(cs)
}

// runUntilHeld runs s and stops it once a request reaches the hold.
func runUntilHeld(t *testing.T, s Setup, hold *batchapi.Hold) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-hold.Reached()
		cancel()
	}()
	runBatch(t, ctx, s)
}

// runUntilSubmitted runs s and stops it once n batches were submitted;
// its log is returned.
func runUntilSubmitted(t *testing.T, s Setup, n int) *lineWaiter {
	t.Helper()
	log := &lineWaiter{want: ": submitted as", n: n, seen: make(chan struct{})}
	s.Log = log
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-log.seen
		cancel()
	}()
	runBatch(t, ctx, s)
	return log
}

// lineWaiter is a Log that closes seen once want has been written n times.
type lineWaiter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	n    int
	seen chan struct{}
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Count(w.buf.String(), w.want)
	w.buf.Write(p)
	if had < w.n && strings.Count(w.buf.String(), w.want) >= w.n {
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBatchStoppedSaysWhatIsLeft: a run stopped while its batches run at
// the provider says which are left there and that the same command
// collects them; the ledger holds them submitted.
func TestBatchStoppedSaysWhatIsLeft(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{Seed: 1, Batch: batchapi.Options{InProgress: time.Hour}})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 15)
	log := runUntilSubmitted(t, s, 2)
	es, err := batch.ReadLedger(s.Dir)
	if err != nil || len(es) != 2 || es[0].State != batch.StateSubmitted || es[1].State != batch.StateSubmitted {
		t.Fatalf("ledger %+v (%v), want two batches submitted", es, err)
	}
	want := fmt.Sprintf("batch: 2 batches left at the provider (%s, %s); the same command collects them", es[0].BatchID, es[1].BatchID)
	if !strings.Contains(log.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, log)
	}
}

// TestBatchRetriesWhatTheServerRefusesForNow: an upload and a poll the
// server answers 503 (then 429) are tried again, waiting a second, then
// twice that, up to the poll interval, and every row is answered once.
func TestBatchRetriesWhatTheServerRefusesForNow(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{Seed: 1, Batch: batchapi.Options{InProgress: time.Millisecond}})
	var mu sync.Mutex
	refused := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Method + " " + r.URL.Path
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/batches/") {
			op = "GET /v1/batches/{id}"
		}
		mu.Lock()
		n := refused[op]
		if (op == "POST /v1/files" || op == "GET /v1/batches/{id}") && n < 4 {
			refused[op]++
			mu.Unlock()
			status := http.StatusServiceUnavailable
			if n%2 == 1 {
				status = http.StatusTooManyRequests
			}
			http.Error(w, `{"error":{"message":"busy"}}`, status)
			return
		}
		mu.Unlock()
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 8)
	var waits []time.Duration
	s.Batch.PollInterval = 3 * time.Second
	s.Batch.After = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		waits = append(waits, d) // the retries', the polls' (3 s) and the sealer's ticks (1 s)
		mu.Unlock()
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	if res := runBatch(t, context.Background(), s); res.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, want done", res.Outcome)
	}
	checkOnce(t, m, s.Dir, 8)
	mu.Lock()
	defer mu.Unlock()
	if refused["POST /v1/files"] != 4 || refused["GET /v1/batches/{id}"] != 4 {
		t.Errorf("refused %v, want 4 of each", refused)
	}
	// Only a retry waits 2 s: a second, doubled; none waits past the poll
	// interval.
	if !slices.Contains(waits, 2*time.Second) {
		t.Errorf("no wait of 2s among %v: the retries do not double", waits)
	}
	if i := slices.IndexFunc(waits, func(d time.Duration) bool { return d > 3*time.Second }); i >= 0 {
		t.Errorf("a wait of %v, past the poll interval", waits[i])
	}
}

// TestBatchLastProgressIsCollected: the progress's last render (when
// Hooks.Progress's context ends) sees the ledger as the run leaves it:
// every batch collected, not downloaded, since the log has already said
// each was collected.
func TestBatchLastProgressIsCollected(t *testing.T) {
	t.Parallel()
	_, ts := newMock(t)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 25)
	r, err := Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var last []runstats.BatchState
	res, err := r.Run(context.Background(), Hooks{
		Progress: func(ctx context.Context) { <-ctx.Done(); last = s.Stats.Snapshot().BatchStates() },
		Final:    func() runstats.ProgressRecord { return runstats.NewProgressRecord(s.Stats.Snapshot(), nil) },
	})
	if err != nil || res.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, %v", res.Outcome, err)
	}
	if len(last) != 1 || last[0].State != string(batch.StateCollected) || last[0].Batches != 3 {
		t.Errorf("the last progress shows the batches %+v, want all 3 collected", last)
	}
}
