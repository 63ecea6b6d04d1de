package pool

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/mockserver"
)

// runMock runs n prompts through an Engine against m on loopback.
func runMock(t *testing.T, m *mockserver.Server, opts Options, n int) (runstats.Summary, runstats.Snapshot) {
	t.Helper()
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	out := openSink(t, t.TempDir())
	stats := runstats.NewStats(nil)
	eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: opts.Concurrency}), stats, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(numberedIDs(n)...), out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return sum, stats.Snapshot()
}

// A 429 that says when to come back is the server's pacing: the prompt
// waits it out and uses up none of its attempts, even with one allowed.
func TestA429WithItsResetIsPacingNotFailure(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 8, Rate429: 0.5, RetryAfter: 2 * time.Millisecond, Seed: 4})
	opts := testOptions(8)
	opts.Retry.MaxAttempts = 1
	sum, snap := runMock(t, m, opts, 40)
	if sum.Written != 40 || sum.Failed != 0 {
		t.Fatalf("written %d, failed %d; want 40 and 0: a 429 with Retry-After failed a prompt", sum.Written, sum.Failed)
	}
	if got := snap.RetriesByCause["http_429"]; got == 0 || got != m.Stats().Injected[mockserver.Fault429] {
		t.Fatalf("retries for http_429: %d, the mock answered %d 429s", got, m.Stats().Injected[mockserver.Fault429])
	}
}

// Against a server that states its limits, a run of more than its
// minute's worth is sent at the rate the limits allow instead of finding
// them by 429s: nothing fails, and few requests are answered 429.
func TestPacedToTheStatedLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
		opts mockserver.Options
	}{
		// The bucket's 600, then 20 at 10 a second.
		{"requests", 620, mockserver.Options{RPM: 600}},
		// A request costs 2 prompt tokens and 90: the bucket holds 652,
		// then 10 a second.
		{"tokens", 670, mockserver.Options{TPM: 60000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mo := tc.opts
			mo.Model, mo.MeanTokens, mo.Seed = "test-model", 4, 4
			m := mockserver.New(mo)
			opts := testOptions(64)
			opts.Sampling.MaxTokens = 90
			sum, _ := runMock(t, m, opts, tc.n)
			if sum.Written != tc.n || sum.Failed != 0 {
				t.Fatalf("written %d, failed %d; want %d and 0", sum.Written, sum.Failed, tc.n)
			}
			st := m.Stats()
			if share := float64(st.Limited) / float64(st.Requests+st.Limited); share > 0.10 {
				t.Fatalf("%d of %d requests answered 429 (%.0f%%): the run found the limit by 429s, not by its headers",
					st.Limited, st.Requests+st.Limited, 100*share)
			}
		})
	}
}
