package pool

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
)

// roomy answers "length" while max_tokens is below need, like a model
// whose answer needs need tokens; it records every max_tokens it was sent.
//
// With a context (ctx > 0, the prompt 5 tokens), it is a server with that
// context: vLLM refuses a request whose prompt plus max_tokens pass it
// (400, too_long); llama.cpp (slotFills) takes it and ends the answer with
// "length" where its slot's context fills.
type roomy struct {
	need      int
	ctx       int
	slotFills bool
	mu        sync.Mutex
	sent      []int
}

const roomyPrompt = 5

// serverContext is a roomy server's context, for a test's table.
type serverContext struct {
	ctx       int
	slotFills bool
}

func (c *roomy) Complete(_ context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	c.mu.Lock()
	c.sent = append(c.sent, req.MaxTokens)
	c.mu.Unlock()
	if c.ctx > 0 && !c.slotFills && roomyPrompt+req.MaxTokens > c.ctx {
		return wire.Response{}, &wire.Error{Status: 400, Cause: wire.CauseTooLong, Message: "too long for the context"}
	}
	n, finish := c.need, "stop"
	if req.MaxTokens < c.need {
		n, finish = req.MaxTokens, "length"
	}
	if c.ctx > 0 && roomyPrompt+n > c.ctx {
		n, finish = c.ctx-roomyPrompt, "length"
	}
	if onDelta != nil {
		onDelta(n)
	}
	return wire.Response{Content: "answer", FinishReason: finish, PromptTokens: roomyPrompt, CompletionTokens: n, UsageKnown: true, Chunks: n}, nil
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
		server     serverContext // the server's context and how it fills
		known      int           // the context as /v1/models listed it (Options.Context)
	}{
		{"keep", job.LengthKeep, 64, 200, nil, []int{64}, "length", serverContext{}, 0},
		{"default keeps", "", 64, 200, nil, []int{64}, "length", serverContext{}, 0},
		{"retry until it fits", job.LengthRetry, 64, 200, nil, []int{64, 128, 256}, "stop", serverContext{}, 0},
		{"retry up to the cap", job.LengthRetry, 32, 200, nil, []int{32, 64, 128}, "length", serverContext{}, 0},
		{"fits at once", job.LengthRetry, 256, 200, nil, []int{256}, "stop", serverContext{}, 0},
		{"the row's own max_tokens", job.LengthRetry, 64, 200, map[string]any{"max_tokens": 50}, []int{64}, "length", serverContext{}, 0},
		// The context known: a retry asks for what is left after the
		// prompt, and once nothing more fits the cut answer is kept.
		{"never past a known context", job.LengthRetry, 200, 1000, nil, []int{200, 295}, "length", serverContext{ctx: 300}, 300},
		// Unknown: the server refuses the doubled request, and the cut
		// answer it already had is kept, not made a too_long error.
		{"a refused retry keeps the cut answer", job.LengthRetry, 200, 1000, nil, []int{200, 400}, "length", serverContext{ctx: 300}, 0},
		// llama.cpp: the slot's context filled before max_tokens (81 of
		// 256): more room cannot help, the answer is kept at once.
		{"a full slot is not max_tokens", job.LengthRetry, 256, 1000, nil, []int{256}, "length", serverContext{ctx: 86, slotFills: true}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &roomy{need: tc.need, ctx: tc.server.ctx, slotFills: tc.server.slotFills}
			stats := runstats.NewStats(nil)
			o := testOptions(1)
			o.Sampling.MaxTokens, o.Sampling.OnLength = tc.maxTokens, tc.policy
			o.Context = tc.known
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
