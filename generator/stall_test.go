package generator

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/mockserver"
)

// TestIdleBodyCountsBytes: the watch measures silence from the last byte,
// whatever the byte (a keep-alive comment is one), on its own clock.
func TestIdleBodyCountsBytes(t *testing.T) {
	var aborted atomic.Int64
	const limit = 100 * time.Millisecond
	// The real timer is set far off; the test drives check itself.
	b := watchIdle(io.NopCloser(strings.NewReader(strings.Repeat(": ping\n\n", 4))), time.Hour, func() { aborted.Add(1) })
	defer b.Close()
	b.limit = limit
	var clock time.Duration
	b.now = func() time.Duration { return clock }
	buf := make([]byte, 8)
	read := func() {
		if _, err := b.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	clock = 90 * time.Millisecond
	b.check()
	read() // a ping at 90ms
	clock = 180 * time.Millisecond
	b.check() // 90ms since the ping
	read()
	clock = 270 * time.Millisecond
	b.check()
	if n := aborted.Load(); n != 0 {
		t.Fatalf("aborted %d times while pings kept coming", n)
	}
	clock = 280 * time.Millisecond // 100ms of silence since the last ping
	b.check()
	if n := aborted.Load(); n != 1 {
		t.Fatalf("aborted %d times after %v of silence, want once", n, limit)
	}
}

// mockOptions ask the mock's model, with fast retries.
func mockOptions(concurrency, maxAttempts int) engineOptions {
	o := retryOptions(true, maxAttempts)
	o.Concurrency = concurrency
	o.Sampling.Model = mockserver.DefaultModel
	return o
}

// TestStallRetried: streams that go silent after their first tokens are
// cut by endpoint.stall_timeout and retried as cause "stall", long before
// endpoint.timeout (10 minutes here: the test's own 30 s bound would end
// the run first, and every assertion would fail, if only the timeout cut
// them).
func TestStallRetried(t *testing.T) {
	t.Run("every request stalls", func(t *testing.T) {
		m := mockserver.New(mockserver.Options{MeanTokens: 16, StallRate: 1, StallAfter: 3})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		dir := t.TempDir()
		wo := wireOptions{BaseURL: ts.URL + "/v1", Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, dir, mockOptions(3, 2), []string{"a", "b", "c"})
		if sum.Written != 0 || sum.Failed != 3 {
			t.Fatalf("written %d failed %d, want 0 and 3", sum.Written, sum.Failed)
		}
		for _, e := range readJSONL[struct {
			ID       string `json:"id"`
			Cause    string `json:"cause"`
			Attempts int    `json:"attempts"`
			Message  string `json:"message"`
		}](t, dir, "errors") {
			if e.Cause != causeStall || e.Attempts != 2 || !strings.Contains(e.Message, "endpoint.stall_timeout") {
				t.Errorf("error record %+v: want cause stall, 2 attempts, a message naming endpoint.stall_timeout", e)
			}
		}
		snap := stats.Snapshot()
		if got := snap.RetriesByCause[causeStall]; got != 3 {
			t.Errorf("retries by cause %v: want stall 3", snap.RetriesByCause)
		}
		if got := snap.ErrorsByCause[causeStall]; got != 3 {
			t.Errorf("errors by cause %v: want stall 3", snap.ErrorsByCause)
		}
		if got := m.Stats().Stalled; got != 6 {
			t.Errorf("the mock stalled %d requests, want 6 (3 keys x 2 attempts)", got)
		}
	})
	t.Run("some stall, all are answered", func(t *testing.T) {
		// One request in flight: the mock's draws land on the same
		// requests on every run.
		m := mockserver.New(mockserver.Options{MeanTokens: 16, StallRate: 0.3, StallAfter: 2, Seed: 3})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		dir := t.TempDir()
		wo := wireOptions{BaseURL: ts.URL + "/v1", Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, dir, mockOptions(1, 8), numberedIDs(12))
		if sum.Written != 12 || sum.Failed != 0 {
			t.Fatalf("written %d failed %d, want 12 and 0", sum.Written, sum.Failed)
		}
		stalled := m.Stats().Stalled
		if stalled == 0 {
			t.Fatal("the mock stalled no request: the test shows nothing")
		}
		if got := stats.Snapshot().RetriesByCause[causeStall]; got != stalled {
			t.Errorf("retries by cause stall %d, want the mock's %d stalls", got, stalled)
		}
		attempts := 0
		for _, r := range recordsByID(t, dir) {
			attempts += r.Attempts
		}
		if want := 12 + int(stalled); attempts != want {
			t.Errorf("records' attempts sum to %d, want 12 + %d stalls", attempts, stalled)
		}
	})
	t.Run("off", func(t *testing.T) {
		// stall_timeout 0: the only bound is the request's timeout.
		m := mockserver.New(mockserver.Options{MeanTokens: 16, StallRate: 1, StallAfter: 3})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		wo := wireOptions{BaseURL: ts.URL + "/v1", Timeout: 200 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, t.TempDir(), mockOptions(1, 1), []string{"a"})
		if sum.Failed != 1 || stats.Snapshot().ErrorsByCause[causeTimeout] != 1 {
			t.Errorf("failed %d, errors by cause %v: want one timeout", sum.Failed, stats.Snapshot().ErrorsByCause)
		}
	})
}
