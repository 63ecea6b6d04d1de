package mockserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseRequestNamesTheField(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{`{"messages":3}`, "messages: unexpected JSON number"},
		{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":"many"}`, "max_tokens: unexpected JSON string"},
		{`{"messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, "stream: unexpected JSON string"},
		{`{"messages":[{"role":"user","content":"hi"},{"content":"x"}]}`, "messages[1].role: field required"},
		{`{"messages":[{"role":"user","content":{"text":"hi"}}]}`, "content: want a string"},
		{`not json`, "invalid JSON body at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			_, err := parseRequest([]byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestMessageContentForms(t *testing.T) {
	body := `{"messages":[
		{"role":"system","content":null},
		{"role":"user","content":[{"type":"text","text":"two words"},{"type":"text","text":"three more words"}]},
		{"role":"assistant","content":"ok"}]}`
	req, err := parseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(req.Messages[1].Content); got != "two words\nthree more words" {
		t.Errorf("parts joined as %q", got)
	}
	if got := req.promptTokens(); got != 6 {
		t.Errorf("prompt tokens %d, want 6 words", got)
	}
	// The same text as a plain string is the same prompt: same answer.
	same, err := parseRequest([]byte(`{"messages":[{"role":"system","content":""},{"role":"user","content":"two words\nthree more words"},{"role":"assistant","content":"ok"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.promptHash() != same.promptHash() {
		t.Error("content parts and the equal string hash differently")
	}
	swapped, _ := parseRequest([]byte(`{"messages":[{"role":"system","content":"two words\nthree more words"},{"role":"user","content":""},{"role":"assistant","content":"ok"}]}`))
	if req.promptHash() == swapped.promptHash() {
		t.Error("moving text between roles kept the hash")
	}
}

// FuzzChat sends arbitrary bodies through the whole handler: it never
// panics, answers 200 or a vLLM-shaped 4xx, and a 200 is a complete answer.
func FuzzChat(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_completion_tokens":1}`,
		`{"model":"other","messages":[]}`,
		`{"messages":[{"role":"user","content":"\u00e9\n\"q\""}],"temperature":0,"n":4}`,
		`[`, `null`, `{"messages":null}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{MeanTokens: 20})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body))))
		switch rec.Code {
		case http.StatusOK:
			out := rec.Body.String()
			if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
				if !strings.HasSuffix(out, "data: [DONE]\n\n") {
					t.Fatalf("stream without [DONE]: %q", out)
				}
				return
			}
			var m struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			// One choice, or n (choices.go), each finished.
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || len(m.Choices) == 0 {
				t.Fatalf("200 with an incomplete answer (%v): %q", err, out)
			}
			for _, c := range m.Choices {
				if c.FinishReason == "" {
					t.Fatalf("200 with an unfinished choice: %q", out)
				}
			}
		case http.StatusBadRequest, http.StatusNotFound:
			var e struct {
				Object, Message string
				Code            int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Object != "error" || e.Message == "" || e.Code != rec.Code {
				t.Fatalf("error body not in vLLM's shape (%v): %q", err, rec.Body.String())
			}
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
	})
}
