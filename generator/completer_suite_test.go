package generator

// One conformance suite over every pool.Completer, as restic runs one
// backend suite over every backend: the HTTP client streamed and plain
// (wire.Client) and the batch mode (batch.Batcher, over the mock's Files
// and Batch APIs), each against the built-in mock on loopback. A
// behaviour one of them cannot show by nature is a row of the table
// saying what it shows instead, checked as strictly: never a skip.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// The Completers under test.
const (
	kindStream = "wire.Client streamed"
	kindPlain  = "wire.Client plain"
	kindBatch  = "batch.Batcher"
)

var completerKinds = []string{kindStream, kindPlain, kindBatch}

// front stands between a Completer and the mock's chat answer: it keeps
// every chat body the server got (for the wire client the POST, for the
// batch mode each line the Batch API answers) and, when held, holds the
// answer back until the request goes away or the test ends.
type front struct {
	mu      sync.Mutex
	bodies  [][]byte
	hold    bool
	arrived chan struct{} // closed at the first chat body
	once    sync.Once
	release chan struct{}
}

func newFront(hold bool) *front {
	return &front{hold: hold, arrived: make(chan struct{}), release: make(chan struct{})}
}

// saw keeps body (nil: none) and, with hold, waits for ctx or the test's
// end; it reports whether the answer may go on.
func (f *front) saw(ctx context.Context, body []byte, hold bool) bool {
	if body != nil {
		f.mu.Lock()
		f.bodies = append(f.bodies, bytes.Clone(body))
		f.mu.Unlock()
	}
	f.once.Do(func() { close(f.arrived) })
	if !hold {
		return true
	}
	select {
	case <-ctx.Done():
	case <-f.release:
	}
	return false
}

// uploadedLines are the request bodies of a batch input file uploaded as
// multipart form data.
func uploadedLines(t *testing.T, ctype string, form []byte) [][]byte {
	_, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		t.Errorf("upload's Content-Type %q: %v", ctype, err)
		return nil
	}
	mr := multipart.NewReader(bytes.NewReader(form), params["boundary"])
	var bodies [][]byte
	for {
		part, err := mr.NextPart()
		if err != nil {
			return bodies
		}
		if part.FormName() != "file" {
			continue
		}
		data, _ := io.ReadAll(part)
		for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var line struct{ Body json.RawMessage }
			if err := json.Unmarshal(l, &line); err != nil {
				t.Errorf("input line %q: %v", l, err)
			}
			bodies = append(bodies, line.Body)
		}
	}
}

func (f *front) sent(t *testing.T) map[string]any {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) != 1 {
		t.Fatalf("the server got %d chat bodies, want 1", len(f.bodies))
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(f.bodies[0]))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("the body the server got: %v", err)
	}
	return m
}

// openCompleter starts a mock with o on loopback and the Completer of
// kind in front of it.
func openCompleter(t *testing.T, kind string, o mockserver.Options, f *front) pool.Completer {
	t.Helper()
	m := mockserver.New(o)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		switch {
		case kind != kindBatch && r.URL.Path == "/v1/chat/completions":
			if !f.saw(r.Context(), b, f.hold) {
				return
			}
		case kind == kindBatch && r.URL.Path == "/v1/files" && r.Method == http.MethodPost:
			for _, line := range uploadedLines(t, r.Header.Get("Content-Type"), b) {
				f.saw(r.Context(), line, false)
			}
		case kind == kindBatch && r.URL.Path == "/v1/batches" && r.Method == http.MethodPost && f.hold:
			// The line is the server's; its batch is not created
			// until the request goes away or the test ends.
			f.saw(r.Context(), nil, true)
			http.Error(w, `{"error":{"message":"held"}}`, http.StatusServiceUnavailable)
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	if kind != kindBatch {
		t.Cleanup(func() { close(f.release) })
		return wire.New(wire.Options{BaseURL: ts.URL + "/v1"})
	}
	b, err := batch.Open(batch.Options{
		API: &batch.API{Base: ts.URL + "/v1"}, Dir: t.TempDir(), MaxRequests: 1, MaxBytes: 1 << 20,
		PollInterval: time.Millisecond, Window: "24h", Slots: 1,
		Left: func() int64 { return 1 }, InFlight: func() int64 { return 1 },
		// The test's clock: a poll or a retry waits for nothing; the
		// sealer's tick (1 s) never comes, MaxRequests 1 seals at once.
		After: func(d time.Duration) <-chan time.Time {
			if d == time.Second {
				return nil
			}
			c := make(chan time.Time, 1)
			c <- time.Time{}
			return c
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(false); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { close(f.release) }) // first: a held line ends before Close waits
	return &keyedBatcher{b: b, keys: mintKeys(t, 1)}
}

// keyedBatcher gives each request a key of its own, as the Engine does
// with Options.KeyedContext: the Batcher names a line by it.
type keyedBatcher struct {
	b    *batch.Batcher
	keys []context.Context
	next atomic.Int32
}

func (k *keyedBatcher) Complete(ctx context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	key := k.keys[int(k.next.Add(1))-1]
	return k.b.Complete(valuesFrom{ctx, key}, req, onDelta)
}

// valuesFrom is ctx's deadline and cancellation with v's values first.
type valuesFrom struct {
	context.Context
	v context.Context
}

func (c valuesFrom) Value(key any) any {
	if x := c.v.Value(key); x != nil {
		return x
	}
	return c.Context.Value(key)
}

// mintKeys are n contexts carrying a key, as pool.KeyOf reads it: the
// key's context value is the pool's own, so an Engine of n rows makes
// them.
func mintKeys(t *testing.T, n int) []context.Context {
	t.Helper()
	mint := &minter{}
	e, err := pool.New(mint, runstats.NewStats(nil), pool.Options{Concurrency: 1,
		Sampling: job.Sampling{Model: "mock-model", MaxTokens: 1, Samples: 1},
		Retry:    pool.RetryPolicy{MaxAttempts: 1}, KeyedContext: true})
	if err != nil {
		t.Fatal(err)
	}
	src := &prompts{n: n}
	if _, err := e.Run(context.Background(), src, nopOutput{}); err != nil {
		t.Fatal(err)
	}
	if len(mint.ctxs) != n {
		t.Fatalf("minted %d keys, want %d", len(mint.ctxs), n)
	}
	return mint.ctxs
}

type minter struct {
	mu   sync.Mutex
	ctxs []context.Context
}

func (m *minter) Complete(ctx context.Context, req wire.Request, _ func(int)) (wire.Response, error) {
	if _, ok := pool.KeyOf(ctx); !ok {
		return wire.Response{}, errors.New("no key in the context")
	}
	m.mu.Lock()
	m.ctxs = append(m.ctxs, context.WithoutCancel(ctx))
	m.mu.Unlock()
	return wire.Response{Model: req.Model, Content: "x", FinishReason: "stop"}, nil
}

type prompts struct{ i, n int }

func (p *prompts) Next() (dataset.Prompt, error) {
	if p.i == p.n {
		return dataset.Prompt{}, io.EOF
	}
	p.i++
	return dataset.Prompt{ID: strconv.Itoa(p.i), Index: int64(p.i), Messages: []chat.Message{{Role: "user", Content: "k"}}}, nil
}

type nopOutput struct{}

func (nopOutput) Recovered() sink.Recovered          { return sink.Recovered{} }
func (nopOutput) Write(*sink.Record) error           { return nil }
func (nopOutput) WriteError(*sink.ErrorRecord) error { return nil }
func (nopOutput) Flush() error                       { return nil }

// ask is the request every case starts from.
func ask(kind, content string) wire.Request {
	return wire.Request{
		Sampling: job.Sampling{Model: "mock-model", MaxTokens: 64, Temperature: 0.7, TopP: 0.9, Samples: 1},
		Messages: []chat.Message{{Role: "user", Content: content}},
		Stream:   kind == kindStream,
	}
}

// call is one Complete, its deltas counted.
type call struct {
	resp   wire.Response
	err    error
	deltas int
}

func complete(ctx context.Context, c pool.Completer, req wire.Request) call {
	var r call
	r.resp, r.err = c.Complete(ctx, req, func(n int) { r.deltas += n })
	return r
}

// completerCase is one behaviour: the mock it needs, the request, and
// what every kind must show (check), or, where a kind cannot by nature,
// what it shows instead (by kind, said in the table).
type completerCase struct {
	name  string
	mock  mockserver.Options
	hold  bool // the server holds the answer back (front.hold)
	req   func(kind string) wire.Request
	run   func(t *testing.T, c pool.Completer, f *front, req wire.Request) call
	check func(t *testing.T, kind string, got call, f *front)
}

func answered(t *testing.T, got call) {
	t.Helper()
	if got.err != nil {
		t.Fatalf("error %v, want an answer", got.err)
	}
}

var completerCases = []completerCase{{
	name: "answer: content, reasoning (reasoning field), finish_reason stop, usage",
	mock: mockserver.Options{Seed: 1, MeanTokens: 12, ReasoningField: mockserver.FieldReasoning},
	check: func(t *testing.T, kind string, got call, _ *front) {
		answered(t, got)
		r := got.resp
		if r.Content == "" || r.Reasoning == "" || r.FinishReason != "stop" || r.Model != "mock-model" {
			t.Errorf("content %q, reasoning %q, finish %q, model %q: want both texts, stop, mock-model", r.Content, r.Reasoning, r.FinishReason, r.Model)
		}
		if !r.UsageKnown || r.PromptTokens == 0 || r.CompletionTokens == 0 {
			t.Errorf("usage known %v, prompt %d, completion %d: want all", r.UsageKnown, r.PromptTokens, r.CompletionTokens)
		}
	},
}, {
	name: "reasoning in reasoning_content (older vLLM, SGLang)",
	mock: mockserver.Options{Seed: 1, MeanTokens: 12, ReasoningField: mockserver.FieldReasoningContent},
	check: func(t *testing.T, kind string, got call, _ *front) {
		answered(t, got)
		if got.resp.Reasoning == "" || got.resp.Content == "" {
			t.Errorf("reasoning %q, content %q: want both", got.resp.Reasoning, got.resp.Content)
		}
	},
}, {
	// wire: streamed text counted by onDelta as it comes; plain and
	// batch: the answer comes whole (the batch's from its output file),
	// so no delta, by nature.
	name: "stream deltas: streamed counts them; plain and batch none (a whole answer)",
	mock: mockserver.Options{Seed: 1, MeanTokens: 12},
	check: func(t *testing.T, kind string, got call, _ *front) {
		answered(t, got)
		if kind == kindStream {
			if got.deltas == 0 || got.resp.Chunks == 0 {
				t.Errorf("%d deltas, %d chunks: want some", got.deltas, got.resp.Chunks)
			}
			return
		}
		if got.deltas != 0 || got.resp.Chunks != 0 {
			t.Errorf("%d deltas, %d chunks: want none from a whole answer", got.deltas, got.resp.Chunks)
		}
	},
}, {
	name: "tool calls read into chat.ToolCall, finish_reason tool_calls",
	mock: mockserver.Options{Seed: 1, MeanTokens: 12},
	req: func(kind string) wire.Request {
		r := ask(kind, "Weather in Paris?")
		r.Tools = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		return r
	},
	check: func(t *testing.T, kind string, got call, f *front) {
		answered(t, got)
		if got.resp.FinishReason != "tool_calls" || len(got.resp.ToolCalls) != 1 {
			t.Fatalf("finish %q, %d calls: want tool_calls and one", got.resp.FinishReason, len(got.resp.ToolCalls))
		}
		c := got.resp.ToolCalls[0]
		var args map[string]any
		if c.ID == "" || c.Type != "function" || c.Function.Name != "get_weather" || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil {
			t.Errorf("call %+v: want an id, function get_weather, arguments a JSON object", c)
		}
		if sent := f.sent(t); sent["tool_choice"] != "auto" || sent["tools"] == nil {
			t.Errorf("the server got tool_choice %v, tools %v: want auto and the row's", sent["tool_choice"], sent["tools"])
		}
	},
}, {
	name: "sampling and the row's own params reach the server as sent",
	mock: mockserver.Options{Seed: 1, MeanTokens: 4},
	req: func(kind string) wire.Request {
		r := ask(kind, "params")
		r.MaxTokens = 33
		r.Extra = map[string]any{"repetition_penalty": 1.05}
		r.Params = map[string]any{"top_k": json.Number("7"), "seed": json.Number("42"), "stop": []any{"END"}}
		return r
	},
	check: func(t *testing.T, kind string, got call, f *front) {
		answered(t, got)
		sent := f.sent(t)
		want := map[string]string{"model": "mock-model", "max_tokens": "33", "temperature": "0.7", "top_p": "0.9",
			"repetition_penalty": "1.05", "top_k": "7", "seed": "42", "stop": "[END]"}
		for k, v := range want {
			if s := stringOf(sent[k]); s != v {
				t.Errorf("the server got %s = %s, want %s", k, s, v)
			}
		}
		if msgs, _ := sent["messages"].([]any); len(msgs) != 1 {
			t.Errorf("the server got messages %v, want the one turn", sent["messages"])
		}
		// The batch's lines are never streamed (a line has one answer).
		if wantStream := kind == kindStream; sent["stream"] != nil && sent["stream"] != wantStream {
			t.Errorf("stream %v, want %v", sent["stream"], wantStream)
		}
	},
}, {
	name: "answer cut at max_tokens: finish_reason length, completion tokens max_tokens",
	mock: mockserver.Options{Seed: 1, MeanTokens: 400},
	req: func(kind string) wire.Request {
		r := ask(kind, "long")
		r.MaxTokens = 5
		return r
	},
	check: func(t *testing.T, kind string, got call, _ *front) {
		answered(t, got)
		if got.resp.FinishReason != "length" || got.resp.CompletionTokens != 5 {
			t.Errorf("finish %q, %d completion tokens: want length and 5", got.resp.FinishReason, got.resp.CompletionTokens)
		}
	},
}, {
	// The wire client classifies the 400 (wire.Classify: too_long, not
	// retried); the batch mode gets the refusal as a failed line, which it
	// reads the same way (wire.MarkTooLong): too_long there too, with the
	// server's message.
	name: "a refusal (400, prompt over the context): *wire.Error, too_long in every mode, not retryable",
	mock: mockserver.Options{Seed: 1, MaxModelLen: 16},
	check: func(t *testing.T, kind string, got call, _ *front) {
		var we *wire.Error
		if !errors.As(got.err, &we) {
			t.Fatalf("error %v (%T), want a *wire.Error", got.err, got.err)
		}
		if got.resp.Content != "" || got.resp.FinishReason != "" {
			t.Errorf("an answer %+v beside the refusal", got.resp)
		}
		cause := wire.Classify(got.err).Cause
		if cause != wire.CauseTooLong || we.Retryable {
			t.Errorf("cause %q, retryable %v (%v): want %q, not retryable", cause, we.Retryable, got.err, wire.CauseTooLong)
		}
		if !strings.Contains(got.err.Error(), "context") && !strings.Contains(got.err.Error(), "max_model_len") && !strings.Contains(got.err.Error(), "maximum") {
			t.Errorf("error %v does not carry the server's reason", got.err)
		}
	},
}, {
	name: "a context cancelled while the server holds the answer: returns with canceled, no answer",
	mock: mockserver.Options{Seed: 1, MeanTokens: 4},
	hold: true,
	run: func(t *testing.T, c pool.Completer, f *front, req wire.Request) call {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan call, 1)
		go func() { done <- complete(ctx, c, req) }()
		<-f.arrived // the server has the request and holds it until the test ends
		cancel()
		return <-done // returned while the answer was still held: promptly
	},
	check: func(t *testing.T, kind string, got call, _ *front) {
		if got.err == nil || got.resp.Content != "" || got.resp.FinishReason != "" {
			t.Fatalf("answer %+v, error %v: want no answer and an error", got.resp, got.err)
		}
		if c := wire.Classify(got.err).Cause; c != wire.CauseCanceled || !errors.Is(got.err, context.Canceled) {
			t.Errorf("cause %q (%v), want %q, unwrapping to context.Canceled", c, got.err, wire.CauseCanceled)
		}
		// The wire client says it as a *wire.Error; the batch mode
		// returns the context's own error, which Classify maps the same.
		var we *wire.Error
		if isWire := errors.As(got.err, &we); isWire != (kind != kindBatch) {
			t.Errorf("%T: a *wire.Error %v, want %v", got.err, isWire, kind != kindBatch)
		}
	},
}}

// stringOf is v as the table spells it: numbers as written, lists in
// brackets.
func stringOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "<absent>"
	case []any:
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = stringOf(x)
		}
		return "[" + strings.Join(s, ",") + "]"
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// TestCompleterConformance runs every behaviour over every Completer.
func TestCompleterConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range completerCases {
		for _, kind := range completerKinds {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				f := newFront(tc.hold)
				c := openCompleter(t, kind, tc.mock, f)
				req := ask(kind, "Why is the sky blue? ("+tc.name+")")
				if tc.req != nil {
					req = tc.req(kind)
				}
				var got call
				if tc.run != nil {
					got = tc.run(t, c, f, req)
				} else {
					got = complete(context.Background(), c, req)
				}
				tc.check(t, kind, got, f)
			})
		}
	}
}
