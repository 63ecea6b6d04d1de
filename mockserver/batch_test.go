package mockserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// words is a prompt of exactly n words (the mock counts words as tokens).
func words(n, salt int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "w%d", salt)
	for i := 1; i < n; i++ {
		b.WriteString(" w")
	}
	return b.String()
}

// sweepPoint runs c clients that each stream per requests of a prompt of
// promptWords words and maxTokens, and returns the server's counters'
// growth and the generated tokens per second of wall time (for the log).
func sweepPoint(t *testing.T, s *Server, url string, c, per, promptWords, maxTokens int) (Stats, float64) {
	t.Helper()
	before := s.Stats()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for i := range per {
				body := map[string]any{
					"messages":   []map[string]string{{"role": "user", "content": words(promptWords, w*per+i)}},
					"max_tokens": maxTokens, "stream": true,
				}
				resp := post(t, context.Background(), url, body)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	after := s.Stats()
	d := Stats{
		Completed:        after.Completed - before.Completed,
		GenerationTokens: after.GenerationTokens - before.GenerationTokens,
		Preemptions:      after.Preemptions - before.Preemptions,
		Recomputed:       after.Recomputed - before.Recomputed,
		PeakRunning:      after.PeakRunning,
	}
	return d, float64(d.GenerationTokens) / elapsed
}

// TestBatchModelKnee sweeps fixed concurrencies against a KV budget that
// holds exactly knee requests at their largest (prompt + max_tokens): at
// and below the knee nothing can be preempted, above it admission by
// prompt lets more in than can grow, so preemptions and recomputed work
// are certain. The counters are asserted; the rates are logged.
func TestBatchModelKnee(t *testing.T) {
	const (
		prompt, maxTokens = 100, 20
		knee              = 10
	)
	s, ts := start(t, Options{
		TokenDelay: time.Millisecond, BatchScale: 10, MeanTokens: 1000,
		KVBudget: knee * (prompt + maxTokens), MaxRunning: 64,
	})
	for _, c := range []int{knee / 2, knee, 2 * knee, 6 * knee} {
		d, rate := sweepPoint(t, s, ts.URL, c, 4, prompt, maxTokens)
		t.Logf("concurrency %d: %.0f tok/s, %d preemptions, %d tokens recomputed", c, rate, d.Preemptions, d.Recomputed)
		if d.Completed != int64(c*4) || d.GenerationTokens != int64(c*4*maxTokens) {
			t.Errorf("concurrency %d: %d completed, %d tokens; want %d, %d", c, d.Completed, d.GenerationTokens, c*4, c*4*maxTokens)
		}
		switch {
		case c <= knee && d.Preemptions != 0:
			t.Errorf("concurrency %d (at most the knee %d): %d preemptions, want 0", c, knee, d.Preemptions)
		case c > knee && (d.Preemptions == 0 || d.Recomputed == 0):
			t.Errorf("concurrency %d (above the knee %d): %d preemptions, %d recomputed; want both > 0", c, knee, d.Preemptions, d.Recomputed)
		}
	}
	st := s.Stats()
	if st.Running != 0 || st.Waiting != 0 {
		t.Errorf("after the sweep: %d running, %d waiting; want 0", st.Running, st.Waiting)
	}
	m := scrape(t, ts.URL)
	if m["vllm:num_preemptions_total"] != float64(st.Preemptions) || m["vllm:kv_cache_usage_perc"] != 0 {
		t.Errorf("/metrics preemptions %v kv %v; want %d, 0", m["vllm:num_preemptions_total"], m["vllm:kv_cache_usage_perc"], st.Preemptions)
	}
}

// TestBatchQueueGauges: the count limit queues under the batch model as it
// does without it, the KV gauge is used/budget, and clients that give up
// (queued or running) leave nothing held.
func TestBatchQueueGauges(t *testing.T) {
	s, ts := start(t, Options{MaxRunning: 2, KVBudget: 1000, TTFT: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			b := strings.NewReader(fmt.Sprintf(`{"stream":true,"messages":[{"role":"user","content":%q}]}`, words(100, i)))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", b)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	waitFor(t, "2 running and 3 waiting", func() bool { st := s.Stats(); return st.Running == 2 && st.Waiting == 3 })
	m := scrape(t, ts.URL)
	if m["vllm:num_requests_running"] != 2 || m["vllm:num_requests_waiting"] != 3 || m["vllm:kv_cache_usage_perc"] != 0.2 {
		t.Errorf("/metrics running %v waiting %v kv %v; want 2, 3, 0.2", m["vllm:num_requests_running"], m["vllm:num_requests_waiting"], m["vllm:kv_cache_usage_perc"])
	}
	cancel()
	wg.Wait()
	waitFor(t, "all aborted", func() bool { return s.Stats().Aborted == 5 })
	if st := s.Stats(); st.Running != 0 || st.Waiting != 0 || scrape(t, ts.URL)["vllm:kv_cache_usage_perc"] != 0 {
		t.Errorf("after cancel: %+v", st)
	}
}
