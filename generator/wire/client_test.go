package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/job"
)

// server is an httptest server that records what it received.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

func newServer(t testing.TB, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		s.paths = append(s.paths, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) client(opts Options) *Client {
	opts.BaseURL = s.URL + "/v1"
	return New(opts)
}

func (s *server) lastBody(t *testing.T) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		t.Fatal("server received no request")
	}
	return s.bodies[len(s.bodies)-1]
}

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replay answers every request with a testdata file.
func replay(t testing.TB, name string) http.HandlerFunc {
	body := testdata(t, name)
	ct := "application/json"
	if strings.HasSuffix(name, ".sse") {
		ct = "text/event-stream"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(body)
	}
}

func userReq(stream bool) Request {
	return Request{
		Sampling: job.Sampling{Model: "Qwen/Qwen3-8B", MaxTokens: 64, Temperature: 0.6, TopP: 0.95},
		Messages: []chat.Message{{Role: "user", Content: "What is 2+2?"}},

		Stream: stream,
	}
}

// asError asserts err is an *Error with the given cause and retryability.
func asError(t *testing.T, err error, cause string, retryable bool) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got an answer, want a %s error", cause)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if e.Cause != cause || e.Retryable != retryable {
		t.Fatalf("error %q: cause %q retryable %v, want %q %v", e.Error(), e.Cause, e.Retryable, cause, retryable)
	}
	return e
}

func TestCompleteStream(t *testing.T) {
	const reasoning = "Okay, the user wants 2+2. Easy.\n"
	const content = "\n\n2 + 2 = 4."
	tests := []struct {
		file       string
		want       Response // Chunks and text; TTFT only checked > 0
		wantCause  string   // "" = an answer
		wantDeltas int
	}{
		{file: "stream_reasoning_usage.sse", wantDeltas: 6, want: Response{
			Model: "Qwen/Qwen3-8B", Reasoning: reasoning, Content: content, FinishReason: "stop",
			PromptTokens: 14, CompletionTokens: 23, UsageKnown: true, Chunks: 6,
		}},
		// finish_reason arrived, then the connection ended: the text is whole,
		// only the counts are missing.
		{file: "stream_finish_no_done.sse", wantDeltas: 6, want: Response{
			Model: "Qwen/Qwen3-8B", Reasoning: reasoning, Content: content, FinishReason: "stop", Chunks: 6,
		}},
		{file: "stream_cut_reasoning.sse", wantCause: CauseStreamCut, wantDeltas: 3},
		{file: "stream_cut_verbatim.sse", wantCause: CauseStreamCut, wantDeltas: 3},
		{file: "stream_abort.sse", wantCause: CauseAborted, wantDeltas: 2},
		{file: "stream_error_event.sse", wantCause: CauseTooLong, wantDeltas: 1}, // vLLM's engine-layer refusal, in the stream
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := newServer(t, replay(t, tt.file))
			var deltas atomic.Int64
			got, err := s.client(Options{}).Complete(context.Background(), userReq(true), func(n int) { deltas.Add(int64(n)) })
			if n := deltas.Load(); n != int64(tt.wantDeltas) {
				t.Errorf("onDelta counted %d, want %d", n, tt.wantDeltas)
			}
			if tt.wantCause != "" {
				e := asError(t, err, tt.wantCause, tt.wantCause != CauseTooLong)
				if tt.wantCause == CauseTooLong && (e.Status != 400 || !strings.Contains(e.Message, "longer than the maximum model length")) {
					t.Errorf("in-stream error: status %d message %q, want 400 and the server's message", e.Status, e.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TTFT <= 0 {
				t.Errorf("TTFT = %v, want > 0", got.TTFT)
			}
			got.TTFT = 0
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCompletePlain(t *testing.T) {
	tests := []struct {
		file      string
		reasoning string // prefix of the expected reasoning
		content   string
		finish    string
		prompt    int
		compl     int
	}{
		{"plain_reasoning_content.json", "We need to respond.", "Hello! How can I help you today?", "stop", 70, 34},
		{"plain_reasoning_only_content_null.json", "User says \"Reply only with OK\"", "", "length", 71, 16},
		{"plain_both_equal.json", "\nOkay, let's see. The user asked", "\n\nThe result of (3 + 5) * 8 is 64.", "stop", 448, 249},
		{"plain_both_content_null_tool_calls.json", "\nOkay, let's see. The user wants", "", "tool_calls", 377, 378},
		{"plain_no_reasoning.json", "", "Of course! Here's a quick one", "stop", 37, 25},
		{"plain_reasoning_content_null.json", "", "Hello! I'm doing great", "stop", 14, 54},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := newServer(t, replay(t, tt.file))
			called := false
			got, err := s.client(Options{}).Complete(context.Background(), userReq(false), func(int) { called = true })
			if err != nil {
				t.Fatal(err)
			}
			if called {
				t.Error("onDelta called for a plain response")
			}
			if !strings.HasPrefix(got.Reasoning, tt.reasoning) || (tt.reasoning == "" && got.Reasoning != "") {
				t.Errorf("reasoning %q, want prefix %q", got.Reasoning, tt.reasoning)
			}
			if !strings.HasPrefix(got.Content, tt.content) || (tt.content == "" && got.Content != "") {
				t.Errorf("content %q, want prefix %q", got.Content, tt.content)
			}
			if got.FinishReason != tt.finish || got.PromptTokens != tt.prompt || got.CompletionTokens != tt.compl || !got.UsageKnown {
				t.Errorf("finish %q usage %d/%d known %v, want %q %d/%d", got.FinishReason, got.PromptTokens, got.CompletionTokens, got.UsageKnown, tt.finish, tt.prompt, tt.compl)
			}
			if strings.Contains(got.Reasoning, "\nOkay") && strings.Count(got.Reasoning, "Okay, let's see") != 1 {
				t.Errorf("reasoning sent under both names was kept twice: %q", got.Reasoning)
			}
		})
	}
}

// TestRequestBody asserts on what the server decoded, not on what we meant
// to send: go-openai's own request type would drop temperature 0 and every
// extra_body key.
func TestRequestBody(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		extra  map[string]any
		check  func(t *testing.T, body map[string]any)
	}{
		{name: "stream with extra_body", stream: true, extra: map[string]any{
			"top_k": 20, "min_p": 0.0, "chat_template_kwargs": map[string]any{"enable_thinking": false},
		}, check: func(t *testing.T, b map[string]any) {
			want := map[string]any{
				"model":       "Qwen/Qwen3-8B",
				"max_tokens":  float64(1024),
				"temperature": float64(0),
				"top_p":       0.95,
				"stream":      true,
				"top_k":       float64(20),
				"min_p":       float64(0),
			}
			for k, v := range want {
				got, ok := b[k]
				if !ok {
					t.Errorf("server did not receive %q", k)
				} else if got != v {
					t.Errorf("%s = %v (%T), want %v", k, got, got, v)
				}
			}
			if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("stream_options = %v, want include_usage true", b["stream_options"])
			}
			if kw, _ := b["chat_template_kwargs"].(map[string]any); kw["enable_thinking"] != false {
				t.Errorf("chat_template_kwargs = %v", b["chat_template_kwargs"])
			}
			msgs, _ := b["messages"].([]any)
			if len(msgs) != 2 {
				t.Fatalf("messages = %v", b["messages"])
			}
			if m, _ := msgs[1].(map[string]any); m["role"] != "user" || m["content"] != "Say \"hi\"\n\t<ok> & done ✓" {
				t.Errorf("messages[1] = %v", msgs[1])
			}
		}},
		{name: "plain", stream: false, check: func(t *testing.T, b map[string]any) {
			if b["stream"] != false {
				t.Errorf("stream = %v, want false", b["stream"])
			}
			if _, ok := b["stream_options"]; ok {
				t.Error("stream_options sent without streaming")
			}
			if b["temperature"] != float64(0) {
				t.Errorf("temperature = %v, want 0", b["temperature"])
			}
		}},
		{name: "extra overrides", stream: false, extra: map[string]any{"temperature": 1.2, "max_tokens": 7}, check: func(t *testing.T, b map[string]any) {
			if b["temperature"] != 1.2 || b["max_tokens"] != float64(7) {
				t.Errorf("temperature %v max_tokens %v, want extra_body's 1.2 and 7", b["temperature"], b["max_tokens"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := "plain_both_equal.json"
			if tt.stream {
				file = "stream_reasoning_usage.sse"
			}
			s := newServer(t, replay(t, file))
			req := Request{
				Sampling: job.Sampling{Model: "Qwen/Qwen3-8B", MaxTokens: 1024, Temperature: 0, TopP: 0.95, Extra: tt.extra},
				Messages: []chat.Message{
					{Role: "system", Content: "You are terse."},
					{Role: "user", Content: "Say \"hi\"\n\t<ok> & done ✓"},
				},
				Stream: tt.stream,
			}
			if _, err := s.client(Options{APIKey: "sk-test"}).Complete(context.Background(), req, nil); err != nil {
				t.Fatal(err)
			}
			tt.check(t, s.lastBody(t))
			if p := s.paths[0]; p != "POST /v1/chat/completions" {
				t.Errorf("request went to %q", p)
			}
			if a := s.headers[0].Get("Authorization"); a != "Bearer sk-test" {
				t.Errorf("Authorization = %q", a)
			}
			if a, ok := s.headers[0]["Accept-Encoding"]; ok {
				t.Errorf("Accept-Encoding %q sent: compression buys an answer nothing, and asking costs every request", a)
			}
		})
	}
}

func TestNoAPIKeySendsNoAuthorization(t *testing.T) {
	s := newServer(t, replay(t, "plain_both_equal.json"))
	if _, err := s.client(Options{}).Complete(context.Background(), userReq(false), nil); err != nil {
		t.Fatal(err)
	}
	if a, ok := s.headers[0]["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", a)
	}
}

func TestStreamKeyInExtraIsRefused(t *testing.T) {
	s := newServer(t, replay(t, "plain_both_equal.json"))
	req := userReq(false)
	req.Extra = map[string]any{"stream": true}
	_, err := s.client(Options{}).Complete(context.Background(), req, nil)
	e := asError(t, err, CauseRequest, false)
	if !strings.Contains(e.Message, "stream") {
		t.Errorf("message %q does not name the key", e.Message)
	}
	if len(s.paths) != 0 {
		t.Error("a request that could not be built was sent")
	}
}

func TestHTTPErrors(t *testing.T) {
	date := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		cause      string
		retryable  bool
		message    string // substring of Error.Message
		retryAfter time.Duration
	}{
		{name: "400 vllm", status: 400, body: string(testdata(t, "error_vllm_400.json")), cause: CauseTooLong,
			message: "maximum context length is 40960 tokens"},
		{name: "400 llama.cpp context", status: 400,
			body:  `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2513,"n_ctx":2048}}`,
			cause: CauseTooLong, message: "prompt too long for the model's context (max_model_len 2048, prompt 2513): the request exceeds the available context size"},
		{name: "404 vllm model", status: 404,
			body:  `{"object":"error","message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`,
			cause: "http_404", message: "does not exist"},
		{name: "429 openai retry-after seconds", status: 429, header: map[string]string{"Retry-After": "2"},
			body: string(testdata(t, "error_openai_429.json")), cause: "http_429", retryable: true,
			message: "Rate limit reached", retryAfter: 2 * time.Second},
		{name: "503 retry-after date", status: 503, header: map[string]string{"Retry-After": date},
			body: "upstream unavailable", cause: "http_503", retryable: true, message: "upstream unavailable", retryAfter: time.Second},
		{name: "500 html", status: 500, body: "<html><body>Internal Server Error</body></html>", cause: "http_500",
			retryable: true, message: "Internal Server Error"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					for k, v := range tt.header {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.body)
				})
				_, err := s.client(Options{}).Complete(context.Background(), userReq(stream), nil)
				e := asError(t, err, tt.cause, tt.retryable)
				if e.Status != tt.status {
					t.Errorf("status %d, want %d", e.Status, tt.status)
				}
				if !strings.Contains(e.Message, tt.message) {
					t.Errorf("message %q, want it to contain %q", e.Message, tt.message)
				}
				// An HTTP date has one-second resolution: accept a second less.
				if tt.retryAfter == 0 && e.RetryAfter != 0 ||
					tt.retryAfter != 0 && (e.RetryAfter < tt.retryAfter || e.RetryAfter > tt.retryAfter+2*time.Second) {
					t.Errorf("RetryAfter %v, want about %v", e.RetryAfter, tt.retryAfter)
				}
			})
		}
	}
}

// TestConnectionResetMidStream: the server sends two chunks and drops the
// connection, as a crashing vLLM worker or a proxy restart does.
func TestConnectionResetMidStream(t *testing.T) {
	lines := strings.SplitAfter(string(testdata(t, "stream_reasoning_usage.sse")), "\n\n")
	for _, chunked := range []bool{true, false} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
				body := lines[0] + lines[1] + lines[2]
				if chunked {
					fmt.Fprintf(buf, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", head, len(body), body)
				} else {
					fmt.Fprintf(buf, "%sConnection: close\r\n\r\n%s", head, body)
				}
				_ = buf.Flush()
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
			})
			var deltas int
			_, err := s.client(Options{}).Complete(context.Background(), userReq(true), func(n int) { deltas += n })
			e := asError(t, err, CauseStreamCut, true)
			if deltas != 2 {
				t.Errorf("counted %d deltas before the cut, want 2", deltas)
			}
			if !strings.Contains(e.Message, "2 text chunks") {
				t.Errorf("message %q does not say how far the stream got", e.Message)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	s := newServer(t, replay(t, "plain_both_equal.json"))
	c := s.client(Options{})
	s.Close()
	for _, stream := range []bool{false, true} {
		_, err := c.Complete(context.Background(), userReq(stream), nil)
		asError(t, err, CauseConnection, true)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	// The server sends headers and one chunk, then stalls until the client
	// gives up: a queued or hung request.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stall := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, strings.SplitAfter(string(testdata(t, "stream_reasoning_usage.sse")), "\n\n")[1])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("timeout/stream=%v", stream), func(t *testing.T) {
			s := newServer(t, stall)
			start := time.Now()
			_, err := s.client(Options{Timeout: 100 * time.Millisecond}).Complete(context.Background(), userReq(stream), nil)
			asError(t, err, CauseTimeout, true)
			if d := time.Since(start); d > 30*time.Second { // not cut, it would wait for the test's end
				t.Errorf("timeout took %v", d)
			}
		})
		t.Run(fmt.Sprintf("caller deadline/stream=%v", stream), func(t *testing.T) {
			s := newServer(t, stall)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := s.client(Options{}).Complete(ctx, userReq(stream), nil)
			asError(t, err, CauseTimeout, true)
		})
		t.Run(fmt.Sprintf("cancel/stream=%v", stream), func(t *testing.T) {
			s := newServer(t, stall)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, err := s.client(Options{}).Complete(ctx, userReq(stream), nil)
			e := asError(t, err, CauseCanceled, false)
			if !errors.Is(e, context.Canceled) {
				t.Errorf("canceled error %v does not unwrap to context.Canceled", e)
			}
		})
	}
}

// TestKeepAliveGaps: a server that pings while a request waits in its queue
// sends many comment lines in a row; go-openai's default limit (300) would
// end the stream with an error.
func TestKeepAliveGaps(t *testing.T) {
	body := testdata(t, "stream_reasoning_usage.sse")
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, strings.Repeat(": ping\n\n", 2000))
		_, _ = w.Write(body)
	})
	got, err := s.client(Options{}).Complete(context.Background(), userReq(true), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.FinishReason != "stop" || got.Chunks != 6 {
		t.Errorf("got %+v", got)
	}
}

func TestModels(t *testing.T) {
	s := newServer(t, replay(t, "models_vllm.json"))
	ids, err := s.client(Options{}).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "Qwen/Qwen3-8B,qwen3-lora" {
		t.Errorf("ids = %v", ids)
	}
	if s.paths[0] != "GET /v1/models" {
		t.Errorf("request %q", s.paths[0])
	}
	// vLLM lists each model's max_model_len (null for a LoRA): kept, for
	// the summary of prompts too long for it.
	list, err := s.client(Options{}).ModelList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []Model{{ID: "Qwen/Qwen3-8B", MaxModelLen: 40960, OwnedBy: "vllm"}, {ID: "qwen3-lora", OwnedBy: "vllm"}}; !slices.Equal(list, want) {
		t.Errorf("ModelList = %+v, want %+v", list, want)
	}

	down := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"object":"error","message":"engine is starting","code":503}`)
	})
	_, err = down.client(Options{}).Models(context.Background())
	e := asError(t, err, "http_503", true)
	if e.Message != "engine is starting" {
		t.Errorf("message %q", e.Message)
	}
}

// TestConnectionsReused: N requests in flight, several rounds, open at most
// N connections: the pool neither waits for nor churns connections.
func TestConnectionsReused(t *testing.T) {
	const n, rounds = 16, 4
	var opened atomic.Int64
	body := testdata(t, "stream_reasoning_usage.sse")
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		time.Sleep(5 * time.Millisecond) // keep all n in flight together
		_, _ = w.Write(body)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			opened.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	c := New(Options{BaseURL: s.URL + "/v1", MaxConns: n})
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				if _, err := c.Complete(context.Background(), userReq(true), nil); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	if got := opened.Load(); got > n {
		t.Errorf("opened %d connections for %d rounds of %d in flight, want at most %d", got, rounds, n, n)
	}
}

// BenchmarkStream compares a whole streamed Complete (go-openai's SSE reader
// plus our chunk decode and accumulation) with a loop that only reads the
// SSE lines of the same response from the same server.
func BenchmarkStream(b *testing.B) {
	const chunks = 512
	payload := benchStreamPayload(chunks)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, payload)
	}))
	b.Cleanup(s.Close)
	req := userReq(true)
	req.MaxTokens = chunks // within the answer bound
	dataPrefix := []byte("data: ")

	b.Run("complete", func(b *testing.B) {
		c := New(Options{BaseURL: s.URL + "/v1", MaxConns: 4})
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Complete(context.Background(), req, nil)
			if err != nil || resp.Chunks != chunks {
				b.Fatalf("chunks %d err %v", resp.Chunks, err)
			}
		}
	})
	b.Run("sse_lines_only", func(b *testing.B) {
		hc := &http.Client{Transport: NewTransport(4, nil)}
		body, _ := EncodeRequest(req)
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			r, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/chat/completions", strings.NewReader(string(body)))
			resp, err := hc.Do(r)
			if err != nil {
				b.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			n := 0
			for sc.Scan() {
				if bytes.HasPrefix(sc.Bytes(), dataPrefix) {
					n++
				}
			}
			resp.Body.Close()
			if n != chunks+3 {
				b.Fatalf("read %d data lines", n)
			}
		}
	})
}

// benchStreamPayload is a streamed answer in vLLM's wire shape: chunks text
// chunks (reasoning, then content), the finish chunk, the usage chunk and
// [DONE].
func benchStreamPayload(chunks int) string {
	var sb strings.Builder
	for i := range chunks {
		field := "reasoning"
		if i >= chunks/2 {
			field = "content"
		}
		fmt.Fprintf(&sb, `data: {"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{%q:" token"},"logprobs":null,"finish_reason":null,"token_ids":null}],"usage":null}`+"\n\n", field)
	}
	sb.WriteString(`data: {"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","token_ids":null}],"usage":null}` + "\n\n")
	sb.WriteString(`data: {"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":14,"total_tokens":526,"completion_tokens":512}}` + "\n\ndata: [DONE]\n\n")
	return sb.String()
}

// TestDeltasReportedBeforeTheStreamWaits: onDelta is batched per read, so
// a chunk must be reported before the stream waits for the next one. The
// server sends each chunk only after the one before was reported: a batch
// held over a wait would hang here, and the test would fail by its bound.
// Three chunks sent in one write may come as one report of 3.
func TestDeltasReportedBeforeTheStreamWaits(t *testing.T) {
	t.Parallel()
	const waited = 4
	reported := make(chan int, 16)
	chunk := func(text, finish string) string {
		return fmt.Sprintf("data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", text, finish)
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range waited {
			_, _ = io.WriteString(w, chunk(fmt.Sprint("t", i), "null"))
			w.(http.Flusher).Flush()
			select {
			case <-reported:
			case <-time.After(time.Minute): // a bound for a failure, not a wait
				return
			}
		}
		_, _ = io.WriteString(w, chunk("a", "null")+chunk("b", "null")+chunk("c", `"stop"`)+"data: [DONE]\n\n")
	})
	total := 0
	got, err := s.client(Options{}).Complete(context.Background(), userReq(true), func(n int) {
		total += n
		reported <- n
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != waited+3 || got.Content != "t0t1t2t3abc" {
		t.Errorf("reported %d deltas, content %q; want %d and t0t1t2t3abc", total, got.Content, waited+3)
	}
}
