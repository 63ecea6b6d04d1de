package held

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// heldKnee is the batch model with its knee at 100 in flight: prompts of
// 400 tokens, answers of at most 24, a KV budget of 100 x 424 tokens.
func heldKnee() Options {
	return Options{Prompt: 400, MinTokens: 16, MaxTokens: 24, TokenDelay: 40 * time.Millisecond,
		BatchScale: 400, KVBudget: 100 * 424, Seed: 1}
}

// heldRate is the tokens a second the client receives holding n requests
// in a fresh Server, over 10 s after a 5 s warm-up.
func heldRate(o Options, n int) (float64, Counts) {
	h := New(o)
	h.Advance(n, 5*time.Second)
	before := h.Counts()
	h.Advance(n, 10*time.Second)
	after := h.Counts()
	return (after.Streamed - before.Streamed) / 10, after
}

// TestHeldThroughputIsAFunctionOfTheRequestsHeld: below the knee the rate
// rises with the requests held and nothing is preempted; past it requests
// are preempted and redo their work, and the rate rises no more. The same
// options give the same counts.
func TestHeldThroughputIsAFunctionOfTheRequestsHeld(t *testing.T) {
	t.Parallel()
	o := heldKnee()
	r25, c25 := heldRate(o, 25)
	r50, _ := heldRate(o, 50)
	r100, c100 := heldRate(o, 100)
	r200, c200 := heldRate(o, 200)
	t.Logf("tokens/s at 25: %.0f, 50: %.0f, 100: %.0f, 200: %.0f; at 200: %+v", r25, r50, r100, r200, c200)
	if r50 < 1.8*r25 || r100 < 1.6*r50 {
		t.Errorf("below the knee the rate must rise almost in proportion: %.0f, %.0f, %.0f at 25, 50, 100", r25, r50, r100)
	}
	if c25.Preemptions != 0 || c100.Preemptions != 0 {
		t.Errorf("preemptions at or below the knee: %d at 25, %d at 100", c25.Preemptions, c100.Preemptions)
	}
	if c200.Preemptions == 0 || c200.Recomputed == 0 {
		t.Errorf("200 held past a knee of 100: %+v, want preemptions and recomputed tokens", c200)
	}
	if r200 > 1.1*r100 {
		t.Errorf("past the knee the rate went on rising: %.0f at 100, %.0f at 200", r100, r200)
	}
	if again, _ := heldRate(o, 200); again != r200 {
		t.Errorf("the same options gave %.0f and %.0f tokens/s", r200, again)
	}
}

// TestHeldEndsAndServesMetrics: a Server with Requests ends once they are all
// answered, and serves vLLM's gauges and counters; counting tokens at the
// end, it has no token counter before the first answer ends.
func TestHeldEndsAndServesMetrics(t *testing.T) {
	t.Parallel()
	o := heldKnee()
	o.Requests, o.CountTokensAtEnd = 50, true
	h := New(o)
	ts := httptest.NewServer(h)
	defer ts.Close()
	scrape := func() string {
		resp, err := ts.Client().Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := scrape(); strings.Contains(m, "vllm:generation_tokens_total") || !strings.Contains(m, "vllm:num_requests_waiting") {
		t.Errorf("before any answer ended:\n%s", m)
	}
	h.Advance(20, 10*time.Millisecond) // less than a step: sent, nothing made
	if c := h.Counts(); c.Sent != 20 || c.InFlight != 20 || c.Streamed != 0 {
		t.Errorf("after sending 20: %+v", c)
	}
	if m := scrape(); !strings.Contains(m, "vllm:num_requests_running{engine=\"0\",model_name=\"mock-model\"} 20") {
		t.Errorf("20 running not shown:\n%s", m)
	}
	h.Advance(20, time.Minute)
	c := h.Counts()
	if c.Sent != 50 || c.Answers != 50 || c.InFlight != 0 || c.Streamed != c.AtEnd {
		t.Errorf("after all answered: %+v", c)
	}
	if m := scrape(); !strings.Contains(m, "vllm:generation_tokens_total") {
		t.Errorf("no token counter after the answers ended:\n%s", m)
	}
}
