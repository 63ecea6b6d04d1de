package pool

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// The faults a faultServer injects before it answers a prompt.
const (
	faultHTTP500   = "http_500"       // 500 with vLLM's error body
	faultHTTP429   = "http_429"       // 429 with Retry-After: 1
	faultHTTP503   = "http_503"       // 503 without Retry-After
	faultHTTP400   = "http_400"       // 400: the request's own fault, never retried
	faultReset     = "reset"          // the connection is reset before any response byte
	faultStreamCut = "stream_cut"     // a 200 stream sends text chunks, then ends without finish_reason or [DONE]
	faultTruncated = "truncated_json" // a plain 200 whose (well-framed) body is half a JSON document
	faultShortBody = "short_body"     // a plain 200 that closes before its Content-Length is reached
)

// Messages the faultServer sends, asserted verbatim in the error records.
const (
	msg400 = "This model's maximum context length is 40960 tokens. However, you requested 50000 tokens in the messages. Please reduce the length of the messages."
	msg500 = "EngineCore encountered an issue. See stack trace (above) for the root cause."
	msg503 = "The server is overloaded, try again later."
)

// faultScript makes the first times requests for one prompt fail with kind;
// times < 0 fails every request.
type faultScript struct {
	kind  string
	times int
}

// hit is one request as the server saw it: when it arrived and when the
// server was done with it (the response written or the connection closed).
type hit struct{ arrived, answered time.Time }

// faultServer answers chat completions for "prompt X" with reasoning
// "thinking about prompt X" and content "answer to prompt X", in the plain or
// streamed shape the request asks for, after failing as its script for that
// prompt says. It records every request per prompt.
type faultServer struct {
	t *testing.T
	// noModels makes GET /v1/models a 404, as behind a gateway that routes
	// only chat completions; by default it lists test-model, as vLLM does.
	noModels bool
	mu       sync.Mutex
	scripts  map[string]faultScript
	hits     map[string][]*hit
}

func newFaultServer(t *testing.T, scripts map[string]faultScript) (*faultServer, *httptest.Server) {
	t.Helper()
	f := &faultServer{t: t, scripts: scripts, hits: map[string][]*hit{}}
	// Every answer closes its connection. A reset before any byte on a
	// reused keep-alive connection is one that net/http sends again by
	// itself (each request carries an Idempotency-Key: a dropped keep-alive
	// connection is not the prompt's fault), so with keep-alive the server
	// would see a varying number of requests per fault; the retries these
	// tests count are the engine's own.
	ts := httptest.NewUnstartedServer(f)
	ts.Config.SetKeepAlivesEnabled(false)
	ts.Start()
	t.Cleanup(ts.Close)
	return f, ts
}

// setScript replaces the script of one prompt; the zero faultScript answers.
func (f *faultServer) setScript(prompt string, s faultScript) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[prompt] = s
}

// requests returns how many requests the server received for prompt.
func (f *faultServer) requests(prompt string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hits[prompt])
}

// total returns how many chat completion requests the server received.
func (f *faultServer) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, h := range f.hits {
		n += len(h)
	}
	return n
}

func (f *faultServer) hitsOf(prompt string) []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]hit, len(f.hits[prompt]))
	for i, h := range f.hits[prompt] {
		out[i] = *h
	}
	return out
}

func (f *faultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" && !f.noModels {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"test-model","object":"model","created":1,"owned_by":"vllm"}]}`)
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		f.t.Errorf("fault server: bad request body: %v", err)
		http.Error(w, `{"object":"error","message":"bad body","code":400}`, http.StatusBadRequest)
		return
	}
	prompt := body.Messages[len(body.Messages)-1].Content
	h := &hit{arrived: time.Now()}
	f.mu.Lock()
	f.hits[prompt] = append(f.hits[prompt], h)
	n := len(f.hits[prompt])
	sc := f.scripts[prompt]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		h.answered = time.Now()
		f.mu.Unlock()
	}()
	if sc.kind != "" && (sc.times < 0 || n <= sc.times) {
		f.fail(w, sc.kind, prompt)
		return
	}
	if body.Stream {
		writeStreamAnswer(w, prompt, false)
	} else {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(plainAnswer(prompt))
	}
}

func (f *faultServer) fail(w http.ResponseWriter, kind, prompt string) {
	errorBody := func(status int, header map[string]string, body string) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	switch kind {
	case faultHTTP500:
		errorBody(500, nil, fmt.Sprintf(`{"object":"error","message":%q,"type":"InternalServerError","param":null,"code":500}`, msg500))
	case faultHTTP503:
		errorBody(503, nil, fmt.Sprintf(`{"object":"error","message":%q,"type":"ServiceUnavailableError","param":null,"code":503}`, msg503))
	case faultHTTP400:
		errorBody(400, nil, fmt.Sprintf(`{"object":"error","message":%q,"type":"BadRequestError","param":null,"code":400}`, msg400))
	case faultHTTP429:
		errorBody(429, map[string]string{"Retry-After": "1"},
			`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	case faultReset:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			f.t.Errorf("hijack: %v", err)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		_ = conn.Close()
	case faultStreamCut:
		writeStreamAnswer(w, prompt, true)
	case faultTruncated:
		b := plainAnswer(prompt)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b[:len(b)/2])
	case faultShortBody:
		b := plainAnswer(prompt)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		_, _ = w.Write(b[:len(b)/2])
	default:
		f.t.Errorf("fault server: unknown fault %q", kind)
	}
}

// retryCause is the cause under which each fault is counted and recorded.
var retryCause = map[string]string{
	faultHTTP500:   "http_500",
	faultHTTP429:   "http_429",
	faultHTTP503:   "http_503",
	faultHTTP400:   "http_400",
	faultReset:     wire.CauseConnection,
	faultStreamCut: wire.CauseStreamCut,
	faultTruncated: wire.CauseDecode,
	faultShortBody: wire.CauseConnection,
}

func wantReasoning(prompt string) string { return "thinking about " + prompt }
func wantContent(prompt string) string   { return "answer to " + prompt }

func plainAnswer(prompt string) []byte {
	r, _ := json.Marshal(wantReasoning(prompt))
	c, _ := json.Marshal(wantContent(prompt))
	return fmt.Appendf(nil, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"test-model",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%s,"reasoning":%s},`+
		`"logprobs":null,"finish_reason":"stop","stop_reason":null}],`+
		`"usage":{"prompt_tokens":5,"total_tokens":12,"completion_tokens":7}}`, c, r)
}

// writeStreamAnswer streams the answer in vLLM's chunk shape; cut stops after
// the first reasoning and content pieces, with no finish_reason and no
// [DONE], and ends the response cleanly, which go-openai reports as io.EOF
// exactly like a complete stream.
func writeStreamAnswer(w http.ResponseWriter, prompt string, cut bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta, finish, usage string) {
		fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model",`+
			`"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":%s}`+"\n\n", delta, finish, usage)
		_ = http.NewResponseController(w).Flush()
	}
	text := func(field, s string) string {
		b, _ := json.Marshal(map[string]string{field: s})
		return string(b)
	}
	chunk(`{"role":"assistant","content":""}`, "null", "null")
	chunk(text("reasoning", "thinking about "), "null", "null")
	chunk(text("content", "answer to "), "null", "null")
	if cut {
		return
	}
	// The rest of each part: a retry must not append it to what a cut
	// attempt delivered ("answer to answer to prompt X").
	chunk(text("reasoning", prompt), "null", "null")
	chunk(text("content", prompt), "null", "null")
	chunk(`{}`, `"stop"`, "null")
	fmt.Fprint(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],`+
		`"usage":{"prompt_tokens":5,"total_tokens":12,"completion_tokens":7}}`+"\n\n"+"data: [DONE]\n\n")
}

// retryOptions retries fast: a wait of a second or more can only come from a
// Retry-After.
func retryOptions(stream bool, maxAttempts int) Options {
	return Options{
		Concurrency: 8, Sampling: job.Sampling{Model: "test-model", MaxTokens: 64, Temperature: 0.6, TopP: 0.95, Samples: 1},
		Stream:       stream,
		Retry:        RetryPolicy{MaxAttempts: maxAttempts, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		SyncInterval: 20 * time.Millisecond,
	}
}

func openRetrySink(t *testing.T, dir string) *sink.Sink {
	t.Helper()
	s, err := sink.Open(sink.Options{
		Dir: dir, Format: sink.FormatJSONL, PartSize: 100, SyncInterval: 20 * time.Millisecond,
		Job: sink.JobRecord{Version: "test", Hash: "test"},
	})
	if err != nil {
		t.Fatalf("open sink: %v", err)
	}
	return s
}

// runEngine runs prompts "prompt <id>" through a real Client and Engine into
// a sink on dir and closes the sink.
func runEngine(t *testing.T, url, dir string, opts Options, retryErrors bool, ids []string) (runstats.Summary, *runstats.Stats) {
	t.Helper()
	opts.RetryErrors = retryErrors
	return runEngineWith(t, wire.Options{BaseURL: url + "/v1", MaxConns: opts.Concurrency}, dir, opts, ids)
}

// runEngineWith is runEngine with the client's options as given.
func runEngineWith(t *testing.T, wo wire.Options, dir string, opts Options, ids []string) (runstats.Summary, *runstats.Stats) {
	t.Helper()
	out := openRetrySink(t, dir)
	stats := runstats.NewStats(nil)
	eng, err := New(wire.New(wo), stats, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(ids...), out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatalf("close sink: %v", err)
	}
	return sum, stats
}

// readJSONL decodes every line of the final *.jsonl files under sub of dir.
func readJSONL[T any](t *testing.T, dir, sub string) []T {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, sub, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for line := 1; sc.Scan(); line++ {
			var v T
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("%s:%d: %v", f, line, err)
			}
			out = append(out, v)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		fh.Close()
	}
	return out
}

// recordsByID reads DIR/data and fails on any id written twice.
func recordsByID(t *testing.T, dir string) map[string]sink.Record {
	t.Helper()
	recs := map[string]sink.Record{}
	for _, r := range readJSONL[sink.Record](t, dir, "data") {
		if _, dup := recs[r.ID]; dup {
			t.Errorf("id %s written twice", r.ID)
		}
		recs[r.ID] = r
	}
	return recs
}

// checkAnswer asserts the record holds the whole answer to "prompt id".
func checkAnswer(t *testing.T, recs map[string]sink.Record, id string, attempts int) {
	t.Helper()
	r, ok := recs[id]
	if !ok {
		t.Errorf("id %s: no record", id)
		return
	}
	prompt := "prompt " + id
	if r.Reasoning != wantReasoning(prompt) || r.Content != wantContent(prompt) || r.FinishReason != "stop" {
		t.Errorf("id %s: reasoning %q content %q finish %q; want %q %q stop",
			id, r.Reasoning, r.Content, r.FinishReason, wantReasoning(prompt), wantContent(prompt))
	}
	if r.Attempts != attempts {
		t.Errorf("id %s: attempts = %d, want %d", id, r.Attempts, attempts)
	}
	if r.CompletionTokens != 7 || r.PromptTokens != 5 {
		t.Errorf("id %s: tokens prompt %d completion %d, want 5 and 7 (from the answering attempt's usage)", id, r.PromptTokens, r.CompletionTokens)
	}
}

// TestRetryEachFaultThenAnswers: a server fails a prompt's first k requests
// (k = 1, 2) with each kind of transient fault, then answers. Every such
// prompt ends as one record with the whole answer and attempts = k+1, the
// server saw exactly k+1 requests for it, a 429's Retry-After is waited for,
// and the prompts around it are answered at the first attempt.
func TestRetryEachFaultThenAnswers(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			kinds := []string{faultHTTP500, faultHTTP429, faultReset}
			if stream {
				kinds = append(kinds, faultStreamCut)
			} else {
				kinds = append(kinds, faultTruncated, faultShortBody)
			}
			type tcase struct {
				id, kind string
				k        int
			}
			var cases []tcase
			var ids []string
			scripts := map[string]faultScript{}
			for _, kind := range kinds {
				for k := 1; k <= 2; k++ {
					c := tcase{id: fmt.Sprintf("%s-x%d", kind, k), kind: kind, k: k}
					cases = append(cases, c)
					ids = append(ids, c.id)
					scripts["prompt "+c.id] = faultScript{kind: kind, times: k}
				}
			}
			healthy := []string{"healthy-0", "healthy-1", "healthy-2"}
			ids = append(ids, healthy...)

			srv, ts := newFaultServer(t, scripts)
			dir := t.TempDir()
			opts := retryOptions(stream, 4)
			opts.Retry.MaxBackoff = 2 * time.Second // the 429's Retry-After: 1 is within it, so it is honoured
			sum, stats := runEngine(t, ts.URL, dir, opts, false, ids)

			if sum.Written != len(ids) || sum.Failed != 0 || sum.Canceled != 0 {
				t.Errorf("summary %+v, want %d written, none failed or canceled", sum, len(ids))
			}
			recs := recordsByID(t, dir)
			if len(recs) != len(ids) {
				t.Errorf("%d records on disk, want %d", len(recs), len(ids))
			}
			if errs := readJSONL[sink.ErrorRecord](t, dir, "errors"); len(errs) != 0 {
				t.Errorf("error records written for transient faults: %+v", errs)
			}
			wantRetries := int64(0)
			wantByCause := map[string]int64{}
			for _, c := range cases {
				wantRetries += int64(c.k)
				wantByCause[retryCause[c.kind]] += int64(c.k)
				t.Run(c.id, func(t *testing.T) {
					checkAnswer(t, recs, c.id, c.k+1)
					prompt := "prompt " + c.id
					if got := srv.requests(prompt); got != c.k+1 {
						t.Errorf("server saw %d requests, want %d", got, c.k+1)
					}
					if c.kind != faultHTTP429 {
						return
					}
					hits := srv.hitsOf(prompt)
					for i := 1; i < len(hits); i++ {
						if wait := hits[i].arrived.Sub(hits[i-1].answered); wait < time.Second {
							t.Errorf("attempt %d came %v after the 429 with Retry-After: 1; want at least 1s", i+1, wait)
						}
					}
				})
			}
			for _, id := range healthy {
				checkAnswer(t, recs, id, 1)
				if got := srv.requests("prompt " + id); got != 1 {
					t.Errorf("%s: server saw %d requests, want 1", id, got)
				}
			}
			// The summary a person reads names each retry by its cause.
			snap := stats.Snapshot()
			if snap.Retries != wantRetries || snap.Errors != 0 {
				t.Errorf("stats: %d retries %d errors, want %d and 0 (by cause: %v)", snap.Retries, snap.Errors, wantRetries, snap.RetriesByCause)
			}
			if !maps.Equal(snap.RetriesByCause, wantByCause) {
				t.Errorf("retries by cause %v, want %v", snap.RetriesByCause, wantByCause)
			}
		})
	}
}

// TestFailedRequestRecordedThenRetriedOnlyWhenAsked: a 400 is the request's
// own fault: one attempt, an error record with the server's status and
// message, the other prompts unaffected. A later run with RetryErrors asks
// for it again and a success supersedes the error; a run without it asks
// for nothing already settled.
func TestFailedRequestRecordedThenRetriedOnlyWhenAsked(t *testing.T) {
	const bad = "bad"
	ids := []string{bad, "flaky", "0", "1", "2", "3", "4"}
	srv, ts := newFaultServer(t, map[string]faultScript{
		"prompt " + bad: {kind: faultHTTP400, times: -1},
		"prompt flaky":  {kind: faultHTTP500, times: 1},
	})
	dir := t.TempDir()
	badKey := sink.Key{ID: bad, Sample: 0}
	opts := retryOptions(true, 4)

	// Run 1: the 400 fails for good, nothing else does.
	sum, _ := runEngine(t, ts.URL, dir, opts, false, ids)
	if sum.Written != len(ids)-1 || sum.Failed != 1 {
		t.Errorf("run 1: summary %+v, want %d written and 1 failed", sum, len(ids)-1)
	}
	if got := srv.requests("prompt " + bad); got != 1 {
		t.Errorf("run 1: server saw %d requests for the 400 prompt, want exactly 1 (a 400 is not retried)", got)
	}
	errs := readJSONL[sink.ErrorRecord](t, dir, "errors")
	if len(errs) != 1 {
		t.Fatalf("run 1: %d error records, want 1: %+v", len(errs), errs)
	}
	// msg400 is vLLM's refusal of a prompt longer than the context: its
	// own cause, with the sizes ahead of the server's message.
	want := sink.ErrorRecord{ID: bad, Sample: 0, Status: 400, Attempts: 1, Cause: wire.CauseTooLong,
		Message: "prompt too long for the model's context (max_model_len 40960, requested 50000, prompt 50000): " + msg400}
	got := errs[0]
	if got.CreatedAt.IsZero() {
		t.Errorf("run 1: error record has no created_at")
	}
	got.CreatedAt = time.Time{}
	if got != want {
		t.Errorf("run 1: error record\n got %+v\nwant %+v", got, want)
	}
	recs := recordsByID(t, dir)
	if _, ok := recs[bad]; ok {
		t.Errorf("run 1: a record was written for the failed prompt")
	}
	checkAnswer(t, recs, "flaky", 2)
	for _, id := range ids[2:] {
		checkAnswer(t, recs, id, 1)
	}

	// Run 2: the server now answers; --retry-errors asks again.
	srv.setScript("prompt "+bad, faultScript{})
	out := openRetrySink(t, dir)
	if !out.Failed(badKey) || out.Done(badKey) {
		t.Errorf("run 2 before: Failed=%v Done=%v, want true false", out.Failed(badKey), out.Done(badKey))
	}
	if !out.Done(sink.Key{ID: "0"}) {
		t.Errorf("run 2 before: a done key is not done")
	}
	opts.RetryErrors = true
	eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1"}), runstats.NewStats(nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	before := srv.total()
	sum, err = eng.Run(context.Background(), newSliceSource(ids...), out)
	if err != nil {
		t.Fatal(err)
	}
	if out.Failed(badKey) || !out.Done(badKey) || out.FailedCount() != 0 {
		t.Errorf("run 2 after: Failed=%v Done=%v FailedCount=%d, want false true 0", out.Failed(badKey), out.Done(badKey), out.FailedCount())
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if sum.Written != 1 || sum.Failed != 0 || sum.Skipped != int64(len(ids)-1) {
		t.Errorf("run 2: summary %+v, want 1 written, 0 failed, %d skipped", sum, len(ids)-1)
	}
	if got := srv.total() - before; got != 1 {
		t.Errorf("run 2: %d requests, want 1 (only the failed prompt)", got)
	}
	recs = recordsByID(t, dir)
	checkAnswer(t, recs, bad, 1)
	if len(recs) != len(ids) {
		t.Errorf("run 2: %d records, want %d", len(recs), len(ids))
	}

	// Run 3: without --retry-errors, and nothing left to do.
	before = srv.total()
	sum, _ = runEngine(t, ts.URL, dir, opts, false, ids)
	if sum.Written != 0 || sum.Failed != 0 || sum.Skipped != int64(len(ids)) {
		t.Errorf("run 3: summary %+v, want everything skipped", sum)
	}
	if got := srv.total() - before; got != 0 {
		t.Errorf("run 3: %d requests, want none", got)
	}
}

// TestRetriesExhausted: a fault that persists ends as an error record after
// exactly max_attempts requests, with the cause of the last failure; the
// other prompts are answered.
func TestRetriesExhausted(t *testing.T) {
	const maxAttempts = 4
	for _, tc := range []struct {
		kind   string
		stream bool
		status int
		cause  string
		msg    string
	}{
		{kind: faultHTTP503, stream: true, status: 503, cause: "http_503", msg: msg503},
		{kind: faultHTTP500, stream: false, status: 500, cause: "http_500", msg: msg500},
		{kind: faultReset, stream: true, cause: wire.CauseConnection},
		{kind: faultStreamCut, stream: true, cause: wire.CauseStreamCut},
		{kind: faultTruncated, stream: false, cause: wire.CauseDecode},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			srv, ts := newFaultServer(t, map[string]faultScript{"prompt down": {kind: tc.kind, times: -1}})
			dir := t.TempDir()
			sum, _ := runEngine(t, ts.URL, dir, retryOptions(tc.stream, maxAttempts), false, []string{"down", "up"})
			if sum.Written != 1 || sum.Failed != 1 {
				t.Errorf("summary %+v, want 1 written 1 failed", sum)
			}
			if got := srv.requests("prompt down"); got != maxAttempts {
				t.Errorf("server saw %d requests, want max_attempts = %d", got, maxAttempts)
			}
			checkAnswer(t, recordsByID(t, dir), "up", 1)
			errs := readJSONL[sink.ErrorRecord](t, dir, "errors")
			if len(errs) != 1 {
				t.Fatalf("%d error records, want 1: %+v", len(errs), errs)
			}
			e := errs[0]
			if e.ID != "down" || e.Attempts != maxAttempts || e.Cause != tc.cause || e.Status != tc.status {
				t.Errorf("error record %+v: want id down, attempts %d, cause %s, status %d", e, maxAttempts, tc.cause, tc.status)
			}
			if tc.msg != "" && e.Message != tc.msg {
				t.Errorf("message %q, want the server's %q", e.Message, tc.msg)
			}
			if e.Message == "" {
				t.Errorf("error record has no message")
			}
		})
	}
}

// TestBackoffBounds: the wait after the n-th failure is full jitter in
// [0, min(max, initial*2^(n-1))], spread over that range (the ceiling
// reachable), for any n however large, and never shorter than the server's
// Retry-After up to the cap: max_backoff bounds what a server can ask (a
// Retry-After: 3600 must not put a slot to sleep for an hour). The doubling used to overflow
// from the 23rd failure (an hour doubled 22 times), leaving a wait of 0:
// the spread checks below run for every ceiling, the largest included, so
// that a wait stuck at 0 fails.
func TestBackoffBounds(t *testing.T) {
	const samples = 500
	for _, pol := range []RetryPolicy{
		{InitialBackoff: time.Second, MaxBackoff: 60 * time.Second},
		{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
		{InitialBackoff: 3 * time.Millisecond, MaxBackoff: 3 * time.Millisecond},
		{InitialBackoff: 0, MaxBackoff: 0},
		{InitialBackoff: time.Hour, MaxBackoff: 1<<63 - 1}, // doubling must not overflow
	} {
		pol.MaxAttempts = 100
		e, err := New(nil, nil, Options{Concurrency: 1, Retry: pol})
		if err != nil {
			t.Fatal(err)
		}
		for _, attempt := range []int{1, 2, 3, 4, 7, 10, 20, 22, 23, 24, 63, 64, 65, 99, 1000, math.MaxInt} {
			// ceil = min(max, initial*2^(attempt-1)), without overflow.
			ceil := pol.InitialBackoff
			for i := 1; i < attempt && ceil < pol.MaxBackoff; i++ {
				if ceil > pol.MaxBackoff/2 {
					ceil = pol.MaxBackoff
					break
				}
				ceil *= 2
			}
			ceil = min(ceil, pol.MaxBackoff)
			for _, retryAfter := range []time.Duration{0, time.Millisecond, 5 * time.Second, 2 * time.Minute} {
				name := fmt.Sprintf("initial=%v/max=%v/attempt=%d/retry-after=%v", pol.InitialBackoff, pol.MaxBackoff, attempt, retryAfter)
				var sum, top time.Duration
				for range samples {
					d := e.backoff(attempt, retryAfter)
					asked := retryAfter // what the server asked, as far as the cap allows
					if pol.MaxBackoff > 0 {
						asked = min(asked, pol.MaxBackoff)
					}
					if d < 0 || d < asked || d > max(ceil, asked) {
						t.Fatalf("%s: backoff %v outside [min(retry-after %v, max), max(ceil %v, that)]", name, d, retryAfter, ceil)
					}
					sum += d / samples
					top = max(top, d)
				}
				// Full jitter: uniform over [0, ceil], so the mean is near
				// ceil/2 and the largest of 500 draws near ceil (a constant
				// wait would bring 200 slots back in lockstep).
				if retryAfter == 0 && ceil >= time.Millisecond {
					if mean := float64(sum) / float64(ceil); mean < 0.4 || mean > 0.6 {
						t.Errorf("%s: mean wait %.2f of the ceiling %v, want about 0.5 (full jitter)", name, mean, ceil)
					}
					if top < ceil/10*8 {
						t.Errorf("%s: longest of %d waits %v, want near the ceiling %v", name, samples, top, ceil)
					}
				}
			}
		}
	}
}

// TestRetriesStayInTheSlot: with one slot, a prompt being retried holds it
// until it is answered, and only then does the next prompt start. Retrying
// inside the slot is what makes the pool size the most load a struggling
// server sees.
func TestRetriesStayInTheSlot(t *testing.T) {
	srv, ts := newFaultServer(t, map[string]faultScript{"prompt a": {kind: faultHTTP500, times: 2}})
	opts := retryOptions(true, 4)
	opts.Concurrency = 1
	dir := t.TempDir()
	sum, _ := runEngine(t, ts.URL, dir, opts, false, []string{"a", "b"})
	if sum.Written != 2 {
		t.Fatalf("summary %+v, want 2 written", sum)
	}
	a, b := srv.hitsOf("prompt a"), srv.hitsOf("prompt b")
	if len(a) != 3 || len(b) != 1 {
		t.Fatalf("requests: a %d, b %d; want 3 and 1", len(a), len(b))
	}
	if !b[0].arrived.After(a[2].answered) {
		t.Errorf("b was requested while a was still being retried: the retry left its slot")
	}
	keys := slices.Sorted(maps.Keys(recordsByID(t, dir)))
	if strings.Join(keys, ",") != "a,b" {
		t.Errorf("records %v, want a,b", keys)
	}
}

// TestConnectionResetBehindGatewayWithoutModels: a server that answers chat
// completions but 404s GET /v1/models (a gateway routing only the chat
// path) resets one request. The server answered the 404, so it is up: the
// reset is that request's own failure, retried like any other, and the run
// ends in well under the time limit.
func TestConnectionResetBehindGatewayWithoutModels(t *testing.T) {
	srv, ts := newFaultServer(t, map[string]faultScript{"prompt r": {kind: faultReset, times: 1}})
	srv.noModels = true
	dir := t.TempDir()
	out := openRetrySink(t, dir)
	eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1"}), runstats.NewStats(nil), retryOptions(true, 4))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a bound for a run that would wait for ever
	defer cancel()
	start := time.Now()
	sum, err := eng.Run(ctx, newSliceSource("r", "s"), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if sum.Written != 2 {
		t.Errorf("after %v: summary %+v, want 2 written: the reset prompt waited for a server that was never away", time.Since(start).Round(time.Millisecond), sum)
	}
	checkAnswer(t, recordsByID(t, dir), "r", 2)
}
