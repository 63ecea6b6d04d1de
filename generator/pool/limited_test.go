package pool

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// Every 429 is pacing, headers or none: against a server that answers two
// requests of three with a bare 429 (no retry-after, no x-ratelimit-*),
// every prompt is answered with retry.max_attempts 2, none failed.
func TestBare429sArePacing(t *testing.T) {
	t.Parallel()
	var n, limited atomic.Int64
	f, _ := newFaultServer(t, map[string]faultScript{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" && n.Add(1)%3 != 0 {
			limited.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`))
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer ts.Close()
	dir := t.TempDir()
	ids := numberedIDs(20)
	sum, stats := runEngine(t, ts.URL, dir, retryOptions(false, 2), false, ids)
	if sum.Written != 20 || sum.Failed != 0 {
		t.Fatalf("written %d, failed %d; want 20 and 0: a bare 429 spent the prompt's attempts", sum.Written, sum.Failed)
	}
	if got, want := stats.Snapshot().RetriesByCause["http_429"], limited.Load(); got != want {
		t.Fatalf("retries for http_429: %d, the server answered %d 429s", got, want)
	}
	recs := recordsByID(t, dir)
	for _, id := range ids {
		checkAnswer(t, recs, id, recs[id].Attempts)
	}
	if got := f.total(); int64(got) != n.Load()-limited.Load() {
		t.Fatalf("the answering server saw %d requests, want %d", got, n.Load()-limited.Load())
	}
}

// A request that the server's stated tokens a minute can never admit
// fails once the first 429 states the limit, no prompt sent again, naming
// max_tokens and both numbers, instead of being paced to the outage bound.
func TestMaxTokensOverTheStatedTokenLimitFailsAtOnce(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("x-ratelimit-limit-tokens", "10000")
		h.Set("x-ratelimit-remaining-tokens", "10000")
		h.Set("x-ratelimit-reset-tokens", "0s")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"message":"Request too large for tokens per min","type":"tokens"}}`))
	}))
	defer ts.Close()
	dir := t.TempDir()
	opts := retryOptions(false, 6)
	opts.Concurrency = 1
	opts.Sampling.MaxTokens = 20000
	sum, _ := runEngine(t, ts.URL, dir, opts, false, numberedIDs(5))
	if sum.Written != 0 || sum.Failed != 5 {
		t.Fatalf("written %d, failed %d; want 0 and 5", sum.Written, sum.Failed)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("the server saw %d requests for 5 prompts; want 1, the one that stated the limit", got)
	}
	for _, e := range readJSONL[sink.ErrorRecord](t, dir, "errors") {
		if !strings.Contains(e.Message, "max_tokens 20000") || !strings.Contains(e.Message, "10000 tokens a minute") {
			t.Fatalf("error %q: does not name max_tokens 20000 and the limit 10000", e.Message)
		}
	}
}
