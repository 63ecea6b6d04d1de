package wire

import (
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// vLLM's spellings of a prompt that cannot fit the model's context, each
// with the sizes it gives; and messages that look alike but are not.
func TestParseTooLong(t *testing.T) {
	cases := []struct {
		name string
		msg  string
		want ContextSizes
		ok   bool
	}{
		{"classic (vLLM <= 0.6, OpenAI)", "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
			ContextSizes{Context: 4096, Requested: 5000, Prompt: 4000, Completion: 1000}, true},
		{"classic, completions endpoint", "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (2000 in the prompt, 100 in the completion). Please reduce your prompt; or completion length.",
			ContextSizes{Context: 2048, Requested: 2100, Prompt: 2000, Completion: 100}, true},
		{"classic, no max_tokens", "This model's maximum context length is 4096 tokens. However, you requested 4200 tokens in the messages, Please reduce the length of the messages.",
			ContextSizes{Context: 4096, Requested: 4200, Prompt: 4200}, true},
		{"input alone", "This model's maximum context length is 1536 tokens. However, your request has 4176 input tokens. Please reduce the length of the input messages.",
			ContextSizes{Context: 1536, Prompt: 4176}, true},
		{"max_tokens too large (vLLM 0.9-0.11)", "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 4096 tokens and your request has 3500 input tokens (1000 > 4096 - 3500). None",
			ContextSizes{Context: 4096, Requested: 4500, Prompt: 3500, Completion: 1000}, true},
		{"output tokens and prompt (current vLLM)", "This model's maximum context length is 4096 tokens. However, you requested 1000 output tokens and your prompt contains at least 4000 input tokens, for a total of at least 5000 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4000)",
			ContextSizes{Context: 4096, Requested: 5000, Prompt: 4000, Completion: 1000}, true},
		{"output tokens and prompt, exact", "This model's maximum context length is 32768 tokens. However, you requested 8192 output tokens and your prompt contains 24577 input tokens, for a total of 32769 tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
			ContextSizes{Context: 32768, Requested: 32769, Prompt: 24577, Completion: 8192}, true},
		{"engine layer", "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
			ContextSizes{Context: 4096, Prompt: 5000}, true},
		{"unknown wording with the key phrase", "This model's maximum context length is 8192 tokens.", ContextSizes{Context: 8192}, true},
		{"another 400", "temperature must be non-negative", ContextSizes{}, false},
		{"model not found", "The model `x` does not exist.", ContextSizes{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseTooLong(c.msg)
			if ok != c.ok || got != c.want {
				t.Errorf("parseTooLong = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

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
