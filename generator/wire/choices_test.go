package wire

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// A request with N > 1 is one request carrying n, and its choices come
// back each as its own Response, plain or streamed, with the usage split
// so that the choices add up to the request's once.
func TestChoicesOneRequest(t *testing.T) {
	for _, stream := range []bool{false, true} {
		m := mockserver.New(mockserver.Options{Model: "m", MeanTokens: 16, Seed: 5})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		c := New(Options{BaseURL: ts.URL + "/v1"})
		req := Request{Sampling: job.Sampling{Model: "m", MaxTokens: 64}, Stream: stream, N: 3,
			Messages: []chat.Message{{Role: "user", Content: "three of them"}}}
		deltas := 0
		r, err := c.Complete(context.Background(), req, func(n int) { deltas += n })
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Stats().Requests; got != 1 {
			t.Fatalf("stream %v: %d requests, want 1", stream, got)
		}
		if len(r.Choices) != 3 {
			t.Fatalf("stream %v: %d choices, want 3", stream, len(r.Choices))
		}
		seen := map[string]bool{}
		prompt, completion := 0, 0
		for i, ch := range r.Choices {
			if ch.Index != i || ch.FinishReason == "" || ch.Content == "" || ch.Model != "m" {
				t.Errorf("stream %v: choice %d: %+v", stream, i, ch)
			}
			seen[ch.Reasoning+"|"+ch.Content] = true
			prompt += ch.PromptTokens
			completion += ch.CompletionTokens
		}
		if len(seen) != 3 {
			t.Errorf("stream %v: choices not distinct", stream)
		}
		if !r.UsageKnown || prompt != r.PromptTokens || completion != r.CompletionTokens || r.Choices[1].PromptTokens != 0 {
			t.Errorf("stream %v: usage %d+%d, choices add up to %d+%d", stream, r.PromptTokens, r.CompletionTokens, prompt, completion)
		}
		if r.Content != r.Choices[0].Content {
			t.Errorf("stream %v: the response is not its first choice", stream)
		}
		if stream && (deltas == 0 || deltas != r.Chunks) {
			t.Errorf("deltas %d, chunks %d", deltas, r.Chunks)
		}
	}
}

// The body carries n only when N > 1: a one-answer request is the same
// bytes as before.
func TestEncodeN(t *testing.T) {
	req := Request{Sampling: job.Sampling{Model: "m", Samples: 4}, Messages: []chat.Message{{Role: "user", Content: "x"}}}
	b, err := EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"n"`) {
		t.Errorf("n sent for one answer: %s", b)
	}
	req.N = 4
	if b, _ = EncodeRequest(req); !strings.Contains(string(b), `,"n":4,`) {
		t.Errorf("n not sent: %s", b)
	}
}

// A server that ignores n answers one choice: it comes back as the one
// choice, index 0, so the caller can tell and keep it.
func TestChoicesIgnored(t *testing.T) {
	for _, stream := range []bool{false, true} {
		ts := httptest.NewServer(mockserver.New(mockserver.Options{Model: "m", MeanTokens: 16, Seed: 5, IgnoreN: true}))
		t.Cleanup(ts.Close)
		c := New(Options{BaseURL: ts.URL + "/v1"})
		req := Request{Sampling: job.Sampling{Model: "m", MaxTokens: 64}, Stream: stream, N: 3,
			Messages: []chat.Message{{Role: "user", Content: "three of them"}}}
		r, err := c.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Choices) != 1 || r.Choices[0].Index != 0 || r.Choices[0].Content == "" {
			t.Errorf("stream %v: %+v", stream, r.Choices)
		}
		if r.Choices[0].PromptTokens != r.PromptTokens || r.Choices[0].CompletionTokens != r.CompletionTokens {
			t.Errorf("stream %v: the one choice does not carry the whole usage", stream)
		}
	}
}

// A stream cut while a choice has no finish_reason is cut, whatever the
// other choices finished.
func TestChoicesStreamCut(t *testing.T) {
	body := "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"model\":\"m\",\"choices\":[{\"index\":1,\"delta\":{\"content\":\"b\"},\"finish_reason\":null}]}\n\n"
	c := New(Options{})
	_, err := c.completeStreamN(context.Background(), strings.NewReader(body), 0, time.Now(), newAnswerBound(Request{}), 2, nil)
	if ce := Classify(err); ce == nil || ce.Cause != CauseStreamCut {
		t.Fatalf("got %v, want stream_cut", err)
	}
}

// With token ids asked, each choice has its own and its own count, the
// prompt's ids on each: the usage is split by what the server said.
func TestChoicesTokenIDs(t *testing.T) {
	for _, stream := range []bool{false, true} {
		ts := httptest.NewServer(mockserver.New(mockserver.Options{Model: "m", MeanTokens: 16, Seed: 5}))
		t.Cleanup(ts.Close)
		c := New(Options{BaseURL: ts.URL + "/v1"})
		req := Request{Sampling: job.Sampling{Model: "m", MaxTokens: 64, ReturnTokenIDs: true, Logprobs: 2}, Stream: stream, N: 3,
			Messages: []chat.Message{{Role: "user", Content: "three of them"}}}
		r, err := c.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Choices) != 3 {
			t.Fatalf("stream %v: %d choices", stream, len(r.Choices))
		}
		sum := 0
		for i, ch := range r.Choices {
			if len(ch.TokenIDs) == 0 || ch.CompletionTokens != len(ch.TokenIDs) || len(ch.PromptTokenIDs) != r.PromptTokens ||
				ch.Logprobs == nil || len(ch.Logprobs.TokenLogprobs) != len(ch.TokenIDs) || ch.TokenIDsMismatch != "" {
				t.Errorf("stream %v: choice %d: %d ids, %d completion tokens, %d prompt ids of %d, mismatch %q",
					stream, i, len(ch.TokenIDs), ch.CompletionTokens, len(ch.PromptTokenIDs), r.PromptTokens, ch.TokenIDsMismatch)
			}
			sum += ch.CompletionTokens
		}
		if sum != r.CompletionTokens {
			t.Errorf("stream %v: choices count %d completion tokens, usage %d", stream, sum, r.CompletionTokens)
		}
	}
}
