package wire

import (
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// A 400 with the refusal is its own cause, never retried, with the sizes
// ahead of the server's message; the same text under another status is not.
func TestClassifyTooLong(t *testing.T) {
	msg := "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
	e := Classify(&openai.APIError{HTTPStatusCode: http.StatusBadRequest, Message: msg})
	if e.Cause != CauseTooLong || e.Retryable {
		t.Fatalf("cause %q retryable %v, want too_long, not retryable", e.Cause, e.Retryable)
	}
	want := "prompt too long for the model's context (max_model_len 4096, requested 5000, prompt 4000, completion 1000): " + msg
	if e.Message != want {
		t.Errorf("message\n got %q\nwant %q", e.Message, want)
	}
	if e.Sizes != (ContextSizes{Context: 4096, Requested: 5000, Prompt: 4000, Completion: 1000}) {
		t.Errorf("sizes %+v", e.Sizes)
	}
	markTooLong(e, nil) // a second pass (the client's fail) does not say it twice
	if strings.Count(e.Message, tooLongPrefix) != 1 {
		t.Errorf("prefixed twice: %q", e.Message)
	}
	if e := Classify(&openai.APIError{HTTPStatusCode: http.StatusInternalServerError, Message: msg}); e.Cause != "http_500" || !e.Retryable {
		t.Errorf("500 with the phrase: cause %q retryable %v", e.Cause, e.Retryable)
	}
}
