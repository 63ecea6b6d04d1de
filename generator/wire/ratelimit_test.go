package wire

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// A hosted server's stated limits reach the caller from every answer: a
// 2xx's in the Response, a 429's in the Error, with OpenAI's finer
// retry-after-ms taken over Retry-After.
func TestLimitsStatedInEveryAnswer(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		now := time.Unix(1e9, 0)
		ts := httptest.NewServer(mockserver.New(mockserver.Options{Model: "m", RPM: 1, TPM: 1000, Clock: func() time.Time { return now }}))
		t.Cleanup(ts.Close)
		c := New(Options{BaseURL: ts.URL + "/v1"})
		req := Request{Sampling: job.Sampling{Model: "m", MaxTokens: 10}, Stream: stream,
			Messages: []chat.Message{{Role: "user", Content: "two words"}}}
		r, err := c.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := Limits{
			Requests: Limit{Known: true, Limit: 1, Remaining: 0, Reset: time.Minute},
			Tokens:   Limit{Known: true, Limit: 1000, Remaining: 988, Reset: 720 * time.Millisecond},
		}
		if r.Limits != want {
			t.Fatalf("stream %v: limits %+v, want %+v", stream, r.Limits, want)
		}
		_, err = c.Complete(context.Background(), req, nil)
		var ce *Error
		if !errors.As(err, &ce) || ce.Status != http.StatusTooManyRequests {
			t.Fatalf("stream %v: second request: %v, want a 429", stream, err)
		}
		if ce.RetryAfter != time.Minute || ce.Limits.Requests != (Limit{Known: true, Limit: 1, Remaining: 0, Reset: time.Minute}) {
			t.Fatalf("stream %v: 429's retry after %v, limits %+v", stream, ce.RetryAfter, ce.Limits)
		}
	}
}

func TestParseReset(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"1s": time.Second, "6m0s": 6 * time.Minute, "20ms": 20 * time.Millisecond, "1.5": 1500 * time.Millisecond,
		"": 0, "soon": 0, "-1s": 0,
	} {
		if got := parseReset(in); got != want {
			t.Errorf("parseReset(%q) = %v, want %v", in, got, want)
		}
	}
	h := http.Header{}
	h.Set("Retry-After", "2")
	h.Set("retry-after-ms", "1250")
	if got := retryAfter(h, time.Now()); got != 1250*time.Millisecond {
		t.Errorf("retryAfter with retry-after-ms 1250 = %v", got)
	}
	h.Del("retry-after-ms")
	if got := retryAfter(h, time.Now()); got != 2*time.Second {
		t.Errorf("retryAfter with Retry-After 2 = %v", got)
	}
}
