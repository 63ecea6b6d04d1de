package pool

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/generator/job"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// roomy answers "length" while max_tokens is below need, like a model
// whose answer needs need tokens; it records every max_tokens it was sent.
type roomy struct {
	need int
	mu   sync.Mutex
	sent []int
}

func (c *roomy) Complete(_ context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	c.mu.Lock()
	c.sent = append(c.sent, req.MaxTokens)
	c.mu.Unlock()
	n, finish := c.need, "stop"
	if req.MaxTokens < c.need {
		n, finish = req.MaxTokens, "length"
	}
	if onDelta != nil {
		onDelta(n)
	}
	return wire.Response{Content: "answer", FinishReason: finish, PromptTokens: 5, CompletionTokens: n, UsageKnown: true, Chunks: n}, nil
}

// TestOnLength: with on_length retry, an answer cut at max_tokens is asked
// again with twice the room, up to 4x max_tokens, and the cut attempts'
// tokens are taken back; with keep (the default), it is recorded as cut.
// A row that sets its own max_tokens keeps it.
func TestOnLength(t *testing.T) {
	tests := []struct {
		name       string
		policy     job.OnLength
		maxTokens  int
		need       int
		params     map[string]any
		wantSent   []int
		wantFinish string
	}{
		{"keep", job.LengthKeep, 64, 200, nil, []int{64}, "length"},
		{"default keeps", "", 64, 200, nil, []int{64}, "length"},
		{"retry until it fits", job.LengthRetry, 64, 200, nil, []int{64, 128, 256}, "stop"},
		{"retry up to the cap", job.LengthRetry, 32, 200, nil, []int{32, 64, 128}, "length"},
		{"fits at once", job.LengthRetry, 256, 200, nil, []int{256}, "stop"},
		{"the row's own max_tokens", job.LengthRetry, 64, 200, map[string]any{"max_tokens": 50}, []int{64}, "length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &roomy{need: tc.need}
			stats := runstats.NewStats(nil)
			o := testOptions(1)
			o.Sampling.MaxTokens, o.Sampling.OnLength = tc.maxTokens, tc.policy
			eng, err := New(c, stats, o)
			if err != nil {
				t.Fatal(err)
			}
			src := newSliceSource("0")
			src.prompts[0].Params = tc.params
			dir := t.TempDir()
			out := openSink(t, dir)
			if _, err := eng.Run(context.Background(), src, out); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.sent, tc.wantSent) {
				t.Errorf("max_tokens sent %v, want %v", c.sent, tc.wantSent)
			}
			r := recordsByID(t, dir)["0"]
			if r.FinishReason != tc.wantFinish || r.Attempts != len(tc.wantSent) {
				t.Errorf("record: finish %q in %d attempts, want %q in %d", r.FinishReason, r.Attempts, tc.wantFinish, len(tc.wantSent))
			}
			snap := stats.Snapshot()
			if got, want := snap.RetriesByCause["length"], int64(len(tc.wantSent)-1); got != want {
				t.Errorf("retries by cause length %d, want %d", got, want)
			}
			if snap.CompletionTokens != int64(r.CompletionTokens) {
				t.Errorf("stats count %d completion tokens, the record %d: a cut attempt's tokens were kept", snap.CompletionTokens, r.CompletionTokens)
			}
		})
	}
}
