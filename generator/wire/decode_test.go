package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/wire/codec"
	"github.com/synthgen/synthgen/job"
)

// sseChunks returns the JSON payloads of a testdata .sse file, [DONE] excluded.
func sseChunks(t testing.TB, name string) [][]byte {
	var out [][]byte
	for _, line := range bytes.Split(testdata(t, name), []byte("\n")) {
		p, ok := bytes.CutPrefix(line, []byte("data: "))
		if ok && string(p) != "[DONE]" {
			out = append(out, p)
		}
	}
	return out
}

func TestDecodeChunkVLLMStream(t *testing.T) {
	chunks := sseChunks(t, "stream_reasoning_usage.sse")
	want := []codec.Delta{
		{Model: "Qwen/Qwen3-8B"}, // role chunk: content "", reasoning_content null
		{Model: "Qwen/Qwen3-8B", Reasoning: "Okay,"},
		{Model: "Qwen/Qwen3-8B", Reasoning: " the user"}, // both names, same text: once
		{Model: "Qwen/Qwen3-8B", Reasoning: " wants 2+2."},
		{Model: "Qwen/Qwen3-8B", Reasoning: " Easy.\n", Content: "\n\n"}, // </think> boundary
		{Model: "Qwen/Qwen3-8B", Content: "2 + 2 = 4"},
		{Model: "Qwen/Qwen3-8B", Content: "."},
		{Model: "Qwen/Qwen3-8B", FinishReason: "stop"}, // finish on an empty delta
		{Model: "Qwen/Qwen3-8B", PromptTokens: 14, CompletionTokens: 23, UsageKnown: true},
	}
	if len(chunks) != len(want) {
		t.Fatalf("%d chunks in testdata, want %d", len(chunks), len(want))
	}
	for i, c := range chunks {
		got, err := decodeChunk(c)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("chunk %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
}

func TestDecodeChunk(t *testing.T) {
	tests := []struct {
		name  string
		chunk string
		want  codec.Delta
		cause string // an *Error's cause instead of a delta
	}{
		{name: "reasoning wins over a different reasoning_content",
			chunk: `{"choices":[{"index":0,"delta":{"reasoning":"a","reasoning_content":"b"}}]}`, want: codec.Delta{Reasoning: "a"}},
		{name: "empty reasoning falls back",
			chunk: `{"choices":[{"index":0,"delta":{"reasoning":"","reasoning_content":"b"}}]}`, want: codec.Delta{Reasoning: "b"}},
		{name: "null content", chunk: `{"choices":[{"index":0,"delta":{"content":null,"reasoning":null}}],"usage":null}`},
		{name: "other samples ignored",
			chunk: `{"choices":[{"index":1,"delta":{"content":"x"}},{"index":0,"delta":{"content":"y"}}]}`, want: codec.Delta{Content: "y"}},
		{name: "usage with choices (continuous usage stats)",
			chunk: `{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
			want:  codec.Delta{Content: "x", PromptTokens: 3, CompletionTokens: 1, UsageKnown: true}},
		{name: "not json", chunk: `{"choices":[`, cause: CauseDecode},
		{name: "content of the wrong type", chunk: `{"choices":[{"index":0,"delta":{"content":["x"]}}]}`, cause: CauseDecode},
		{name: "vllm flat error", chunk: `{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}`, cause: "http_500"},
		{name: "error without code", chunk: `{"error":{"message":"overloaded"}}`, cause: CauseStreamErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeChunk([]byte(tt.chunk))
			if tt.cause != "" {
				var e *Error
				if !errors.As(err, &e) || e.Cause != tt.cause {
					t.Fatalf("err %v, want cause %s", err, tt.cause)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeChunkErrorNamesField(t *testing.T) {
	_, err := decodeChunk([]byte(`{"choices":[{"index":0,"delta":{"content":42}}]}`))
	if err == nil || !strings.Contains(err.Error(), "content") || !strings.HasPrefix(err.Error(), "decode") {
		t.Errorf("error %q does not name the field", err)
	}
}

func TestDecodeResponseFailures(t *testing.T) {
	tests := []struct {
		name, body, cause string
		retryable         bool
	}{
		{"no choices", `{"id":"x","object":"chat.completion","model":"m","choices":[],"usage":null}`, CauseIncomplete, true},
		{"no finish_reason", `{"choices":[{"index":0,"message":{"content":"half"},"finish_reason":null}]}`, CauseIncomplete, true},
		{"aborted", `{"choices":[{"index":0,"message":{"content":"half"},"finish_reason":"abort"}]}`, CauseAborted, true},
		{"html from a proxy", `<html>502 Bad Gateway</html>`, CauseDecode, true},
		{"empty", ``, CauseDecode, true},
		{"vllm error with 200", string(testdata(t, "error_vllm_400.json")), "http_400", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeResponse([]byte(tt.body))
			asError(t, err, tt.cause, tt.retryable)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"2", 2 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0.5", 500 * time.Millisecond},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"", 0}, {"-3", 0}, {"soon", 0}, {"NaN", 0}, {"Inf", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.v, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	timeoutErr := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name      string
		err       error
		cause     string
		retryable bool
		status    int
		message   string
	}{
		{"api 429", &openai.APIError{HTTPStatusCode: 429, Message: "slow down"}, "http_429", true, 429, "slow down"},
		{"api 401", fmt.Errorf("wrapped: %w", &openai.APIError{HTTPStatusCode: 401, Message: "bad key"}), "http_401", false, 401, "bad key"},
		{"in-stream api error with code", &openai.APIError{Code: 503, Message: "busy"}, "http_503", true, 503, "busy"},
		{"request error with vllm body", &openai.RequestError{HTTPStatusCode: 400, Body: testdata(t, "error_vllm_400.json")},
			CauseTooLong, false, 400, "This model's maximum context length"},
		{"request error 502 text", &openai.RequestError{HTTPStatusCode: 502, Body: []byte("Bad Gateway\n")}, "http_502", true, 502, "Bad Gateway"},
		{"canceled", fmt.Errorf("post: %w", context.Canceled), CauseCanceled, false, 0, ""},
		{"deadline", context.DeadlineExceeded, CauseTimeout, true, 0, ""},
		{"net timeout", timeoutErr, CauseTimeout, true, 0, ""},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, CauseConnection, true, 0, ""},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, CauseConnection, true, 0, ""},
		{"eof", fmt.Errorf("post: %w", io.EOF), CauseConnection, true, 0, ""},
		{"unexpected eof", io.ErrUnexpectedEOF, CauseConnection, true, 0, ""},
		{"idle keep-alive closed under a POST", errors.New(`Post "http://h/v1/chat/completions": http: server closed idle connection`), CauseConnection, true, 0, ""},
		{"cut stream", errStreamCut, CauseStreamCut, true, 0, ""},
		{"ours passes through", fmt.Errorf("x: %w", &Error{Cause: CauseAborted, Retryable: true}), CauseAborted, true, 0, ""},
		{"unknown", errors.New("something else"), CauseOther, false, 0, "something else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Classify(tt.err)
			if e.Cause != tt.cause || e.Retryable != tt.retryable || e.Status != tt.status {
				t.Errorf("got cause %q retryable %v status %d, want %q %v %d", e.Cause, e.Retryable, e.Status, tt.cause, tt.retryable, tt.status)
			}
			if !strings.Contains(e.Message, tt.message) {
				t.Errorf("message %q, want %q in it", e.Message, tt.message)
			}
			if e.Err == nil && tt.cause != CauseAborted {
				t.Error("underlying error lost")
			}
		})
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}

func TestEncodeRequestStrings(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and \ backslash`, "new\nline\ttab\r\x00\x1f\x7f", "<tag> & 'x'",
		"ünïcødé ✓ 😊", "\u2028\u2029", "bad \xff utf8 \xe2\x82", strings.Repeat("long ", 1000),
	} {
		req := Request{Sampling: job.Sampling{Model: s}, Messages: []chat.Message{{Role: "user", Content: s}}}
		body, err := EncodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Model    string
			Messages []struct{ Role, Content string }
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%q: body %s is not JSON: %v", s, body, err)
		}
		want := stdlibString(t, s)
		if got.Model != want || got.Messages[0].Content != want {
			t.Errorf("%q came back as %q", s, got.Messages[0].Content)
		}
	}
}

func TestEncodeRequestExtraReplacesEverything(t *testing.T) {
	extra := map[string]any{"model": "m2", "messages": []any{}, "temperature": 1, "stream_options": nil}
	body, err := EncodeRequest(Request{Sampling: job.Sampling{Model: "m", Extra: extra}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"stream":true,"messages":[],"model":"m2","stream_options":null,"temperature":1}`
	if string(body) != want {
		t.Errorf("body\n %s\nwant\n %s", body, want)
	}
	if _, err := EncodeRequest(Request{Sampling: job.Sampling{Extra: map[string]any{"f": func() {}}}}); err == nil || !strings.Contains(err.Error(), "extra_body.f") {
		t.Errorf("unencodable extra: err %v, want one naming extra_body.f", err)
	}
}

// stdlibString is s as encoding/json sends it: invalid UTF-8 bytes become
// U+FFFD one by one.
func stdlibString(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzDecodeChunk: any bytes give either a delta or an *Error that says what
// failed; a delta only ever comes from valid JSON.
func FuzzDecodeChunk(f *testing.F) {
	for _, c := range sseChunks(f, "stream_reasoning_usage.sse") {
		f.Add(c)
	}
	for _, c := range sseChunks(f, "stream_error_event.sse") {
		f.Add(c)
	}
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":null}}],"usage":{"prompt_tokens":1e3}}`))
	f.Add([]byte(`{"object":"error","message":{"detail":[1]},"code":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeChunk(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Cause == "" || e.Message == "" {
				t.Fatalf("error %v is not a classified *Error with a message", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("decoded invalid JSON %q into %+v", data, d)
		}
		if !utf8.ValidString(d.Content) || !utf8.ValidString(d.Reasoning) {
			t.Fatalf("decoded text is not UTF-8: %+v", d)
		}
	})
}

// FuzzDecodeResponse: any body gives either an answer that says how it
// finished, or an *Error.
func FuzzDecodeResponse(f *testing.F) {
	for _, name := range []string{
		"plain_reasoning_content.json", "plain_reasoning_only_content_null.json", "plain_both_equal.json",
		"plain_no_reasoning.json", "error_vllm_400.json", "error_openai_429.json",
	} {
		f.Add(testdata(f, name))
	}
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"abort"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeResponse(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Cause == "" || e.Message == "" {
				t.Fatalf("error %v is not a classified *Error with a message", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("decoded invalid JSON %q", body)
		}
		if r.FinishReason == "" || r.FinishReason == "abort" || r.FinishReason == "error" {
			t.Fatalf("answer with finish_reason %q accepted", r.FinishReason)
		}
	})
}

// FuzzEncodeRequest: whatever the strings, the body is JSON and says them.
func FuzzEncodeRequest(f *testing.F) {
	f.Add("Qwen/Qwen3-8B", "user", "What is 2+2?", 0.0)
	f.Add("m", "system", "\x00\"\\\n\xff😊", 0.6)
	f.Fuzz(func(t *testing.T, model, role, content string, temp float64) {
		body, err := EncodeRequest(Request{Sampling: job.Sampling{Model: model, Temperature: temp}, Messages: []chat.Message{{Role: role, Content: content}}, Stream: true})
		if err != nil {
			return // NaN or Inf temperature: refused, never sent
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		msgs := got["messages"].([]any)
		m := msgs[0].(map[string]any)
		if got["model"] != stdlibString(t, model) || m["content"] != stdlibString(t, content) {
			t.Fatalf("strings changed: %q", body)
		}
		if got["temperature"] != temp {
			t.Fatalf("temperature %v became %v", temp, got["temperature"])
		}
	})
}

func BenchmarkEncodeRequest(b *testing.B) {
	req := Request{
		Sampling: job.Sampling{Model: "Qwen/Qwen3-8B", MaxTokens: 8192, Temperature: 0.6, TopP: 0.95, Extra: map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": true}}},
		Messages: []chat.Message{
			{Role: "system", Content: "You are a helpful assistant."},
			{Role: "user", Content: strings.Repeat("Explain the difference between a process and a thread. ", 30)},
		},
		Stream: true,
	}
	body, _ := EncodeRequest(req)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	body := testdata(b, "plain_both_equal.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	chunk := sseChunks(b, "stream_reasoning_usage.sse")[5] // a content delta
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeChunk(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEncodeRequestRowParams: a request row's own fields replace the job's
// and extra_body's of the same name, numbers exactly as the row wrote them
// (temperature 0 included); either spelling of the length replaces both.
func TestEncodeRequestRowParams(t *testing.T) {
	spec := job.Sampling{Model: "m", MaxTokens: 8192, Temperature: 0.6, TopP: 0.95, Extra: map[string]any{"top_k": 20, "max_completion_tokens": 100, "seed": 1}}
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{
			name: "no row fields: the job's",
			want: `{"model":"m","messages":[],"max_tokens":8192,"temperature":0.6,"top_p":0.95,"stream":false,"max_completion_tokens":100,"seed":1,"top_k":20}`,
		},
		{
			name:   "temperature 0, top_k and seed from the row",
			params: map[string]any{"temperature": json.Number("0"), "top_k": json.Number("-1"), "seed": json.Number("12345678901234567890")},
			want:   `{"model":"m","messages":[],"max_tokens":8192,"top_p":0.95,"stream":false,"max_completion_tokens":100,"seed":12345678901234567890,"temperature":0,"top_k":-1}`,
		},
		{
			name:   "the row's max_tokens replaces max_completion_tokens too",
			params: map[string]any{"max_tokens": json.Number("7"), "stop": []any{"</s>"}, "temperature": json.Number("1.50")},
			want:   `{"model":"m","messages":[],"top_p":0.95,"stream":false,"seed":1,"top_k":20,"max_tokens":7,"stop":["\u003c/s\u003e"],"temperature":1.50}`,
		},
		{
			name:   "the row's max_completion_tokens replaces max_tokens",
			params: map[string]any{"max_completion_tokens": json.Number("9")},
			want:   `{"model":"m","messages":[],"temperature":0.6,"top_p":0.95,"stream":false,"seed":1,"top_k":20,"max_completion_tokens":9}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := EncodeRequest(Request{Sampling: spec, Messages: []chat.Message{}, Params: tt.params})
			if err != nil {
				t.Fatal(err)
			}
			if string(body) != tt.want {
				t.Errorf("body\n %s\nwant\n %s", body, tt.want)
			}
		})
	}
	for _, k := range []string{"stream", "stream_options", "model", "messages"} {
		if _, err := EncodeRequest(Request{Sampling: spec, Params: map[string]any{k: true}}); err == nil {
			t.Errorf("a row's %q was sent", k)
		}
	}
}
