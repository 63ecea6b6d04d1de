package mockserver

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock a test advances.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ask posts one request and returns its status and headers, the body read.
func ask(t *testing.T, url string, body map[string]any) (int, http.Header) {
	t.Helper()
	resp := post(t, context.Background(), url, body)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

func TestRequestsPerMinuteAreStatedAndKept(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	s, ts := start(t, Options{RPM: 2, Clock: clock.now})
	body := map[string]any{"messages": userMessages("hello there"), "max_tokens": 4}
	for i, want := range []string{"1", "0"} {
		code, h := ask(t, ts.URL, body)
		if code != http.StatusOK || h.Get("x-ratelimit-remaining-requests") != want || h.Get("x-ratelimit-limit-requests") != "2" {
			t.Fatalf("request %d: %d, remaining %q limit %q; want 200, %s of 2", i, code, h.Get("x-ratelimit-remaining-requests"), h.Get("x-ratelimit-limit-requests"), want)
		}
	}
	code, h := ask(t, ts.URL, body)
	if code != http.StatusTooManyRequests {
		t.Fatalf("third request: %d, want 429", code)
	}
	// Two requests a minute: one comes back every 30s; two take a minute.
	if h.Get("retry-after") != "30" || h.Get("retry-after-ms") != "30000" || h.Get("x-ratelimit-reset-requests") != "1m0s" {
		t.Fatalf("429's headers: retry-after %q, -ms %q, reset %q; want 30, 30000, 1m0s",
			h.Get("retry-after"), h.Get("retry-after-ms"), h.Get("x-ratelimit-reset-requests"))
	}
	if h.Get("x-ratelimit-limit-tokens") != "" {
		t.Fatalf("no token limit set, yet x-ratelimit-limit-tokens %q", h.Get("x-ratelimit-limit-tokens"))
	}
	clock.advance(30 * time.Second)
	if code, h := ask(t, ts.URL, body); code != http.StatusOK || h.Get("x-ratelimit-reset-requests") != "1m0s" {
		t.Fatalf("after 30s: %d, reset %q; want 200, 1m0s", code, h.Get("x-ratelimit-reset-requests"))
	}
	if st := s.Stats(); st.Limited != 1 || st.Requests != 3 {
		t.Fatalf("stats: limited %d requests %d; want 1 and 3", st.Limited, st.Requests)
	}
}

func TestTokensPerMinuteCountPromptAndMaxTokens(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	_, ts := start(t, Options{TPM: 600, Clock: clock.now})
	// 2 prompt words ("hello there") + 3 of the system's, + 295: 300 tokens.
	body := map[string]any{"messages": userMessages("hello there"), "max_tokens": 295}
	code, h := ask(t, ts.URL, body)
	if code != http.StatusOK || h.Get("x-ratelimit-remaining-tokens") != "300" || h.Get("x-ratelimit-reset-tokens") != "30s" {
		t.Fatalf("first: %d, remaining %q reset %q; want 200, 300, 30s", code, h.Get("x-ratelimit-remaining-tokens"), h.Get("x-ratelimit-reset-tokens"))
	}
	clock.advance(20 * time.Millisecond) // 0.2 tokens back
	if code, _ := ask(t, ts.URL, body); code != http.StatusOK {
		t.Fatalf("second: %d, want 200", code)
	}
	code, h = ask(t, ts.URL, body)
	if code != http.StatusTooManyRequests || h.Get("retry-after-ms") != "29980" || h.Get("retry-after") != "30" {
		t.Fatalf("third: %d, retry-after-ms %q, retry-after %q; want 429, 29980, 30", code, h.Get("retry-after-ms"), h.Get("retry-after"))
	}
	if got := resetForm(20 * time.Millisecond); got != "20ms" {
		t.Fatalf("resetForm(20ms) = %q", got)
	}
	if got := resetForm(6 * time.Minute); got != "6m0s" {
		t.Fatalf("resetForm(6m) = %q", got)
	}
}
