package pool

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/mockserver"
)

// mockOptions ask the mock's model, with fast retries.
func mockOptions(concurrency, maxAttempts int) Options {
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
		wo := wire.Options{BaseURL: ts.URL + "/v1", Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond}
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
			if e.Cause != wire.CauseStall || e.Attempts != 2 || !strings.Contains(e.Message, "endpoint.stall_timeout") {
				t.Errorf("error record %+v: want cause stall, 2 attempts, a message naming endpoint.stall_timeout", e)
			}
		}
		snap := stats.Snapshot()
		if got := snap.RetriesByCause[wire.CauseStall]; got != 3 {
			t.Errorf("retries by cause %v: want stall 3", snap.RetriesByCause)
		}
		if got := snap.ErrorsByCause[wire.CauseStall]; got != 3 {
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
		wo := wire.Options{BaseURL: ts.URL + "/v1", Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, dir, mockOptions(1, 8), numberedIDs(12))
		if sum.Written != 12 || sum.Failed != 0 {
			t.Fatalf("written %d failed %d, want 12 and 0", sum.Written, sum.Failed)
		}
		stalled := m.Stats().Stalled
		if stalled == 0 {
			t.Fatal("the mock stalled no request: the test shows nothing")
		}
		if got := stats.Snapshot().RetriesByCause[wire.CauseStall]; got != stalled {
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
		wo := wire.Options{BaseURL: ts.URL + "/v1", Timeout: 200 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, t.TempDir(), mockOptions(1, 1), []string{"a"})
		if sum.Failed != 1 || stats.Snapshot().ErrorsByCause[wire.CauseTimeout] != 1 {
			t.Errorf("failed %d, errors by cause %v: want one timeout", sum.Failed, stats.Snapshot().ErrorsByCause)
		}
	})
}
