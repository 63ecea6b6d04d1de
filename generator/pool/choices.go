package pool

// A prompt's samples asked in one request carrying n (OpenAI's n,
// generation.n_per_request): the server computes the prompt once and
// answers n choices, each one sample's record, as if it had been asked
// alone. What the request cannot give (a choice the server did not send,
// one cut at max_tokens that on_length: retry wants longer, one not in the
// job's shape) is asked alone right after, in the same slot, where the
// prefix placement sends it to the replica that just computed the prompt.
// A server that answers one choice ignores n: said once, and from then on
// each sample is its own request.

import (
	"context"
	"fmt"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// moreSample is one more sample of a task's prompt, asked in its request.
type moreSample struct {
	sample  int
	pending bool // as task.pending
}

// samples are all the samples task j asks, its own first.
func (j task) samples() []moreSample {
	return append([]moreSample{{sample: j.sample, pending: j.pending}}, j.more...)
}

func (j task) keyOf(sample int) sink.Key { return sink.Key{ID: j.prompt.ID, Sample: sample} }

// together says whether row p's samples still to do go in one request:
// the job asks for it and has several samples, no server was found to
// ignore n, and nothing else decides n (a whole conversation's turns, the
// batch mode's keyed lines, an n in extra_body or in the row).
func (e *Engine) together(p dataset.Prompt) bool {
	if !e.opts.NPerRequest || e.opts.Sampling.Samples < 2 || e.nIgnored.Load() || e.opts.Prompt.Whole() || e.opts.KeyedContext {
		return false
	}
	_, extra := e.opts.Sampling.Extra["n"]
	_, own := p.Params["n"]
	return !extra && !own
}

// doChoices asks task j's samples in one request and hands the writer a
// result per sample: a record per choice answered, the same failure for
// each when the request failed for good, nothing written for any when the
// run stopped it. The request is retried as any other (ask); the results
// are sent only once it ended, so a run cut during it writes none of them.
func (e *Engine) doChoices(ctx, wait context.Context, route *router, j task, results chan<- result) {
	samples := j.samples()
	tr := e.stats.Begin()
	start := time.Now()
	resp, attempts, fail := e.ask(ctx, wait, route, tr, j, j.msgs)
	if attempts == 0 || fail != nil {
		if fail == nil {
			tr.Cancel()
		}
		for i, s := range samples {
			r := result{pending: s.pending, key: j.keyOf(s.sample)}
			if fail != nil {
				f := *fail
				f.Sample = s.sample
				r.tr, r.cause, r.fail = e.trackerFor(i, tr), f.Cause, &f
			}
			e.hand(results, r)
		}
		return
	}
	latency := time.Since(start)
	choices := resp.Choices
	if choices == nil {
		choices = []wire.Response{resp} // a Completer that answers one choice, whatever n
	}
	if len(choices) == 1 {
		e.ignoredN(len(samples))
	}
	got := make([]bool, len(samples))
	recorded := 0
	var left []moreSample
	for _, ch := range choices {
		if ch.Index < 0 || ch.Index >= len(samples) || got[ch.Index] {
			continue
		}
		got[ch.Index] = true
		s := samples[ch.Index]
		if ch.TTFT = resp.TTFT; e.askAlone(j, ch) {
			left = append(left, s)
			continue
		}
		c := &conversation{last: j.msgs}
		c.answered(j.msgs, ch, attempts)
		one := task{prompt: j.prompt, sample: s.sample, msgs: j.msgs}
		e.hand(results, result{rec: e.record(one, c, latency), tr: e.trackerFor(recorded, tr), outcome: c.outcome(latency, e.opts.Price),
			pending: s.pending, key: one.key()})
		recorded++
	}
	if recorded == 0 {
		tr.Cancel() // its samples are each asked alone below
	}
	for i, s := range samples {
		if !got[i] {
			left = append(left, s)
		}
	}
	// The rest, one request each, back to back in this slot.
	for _, s := range left {
		one := task{prompt: j.prompt, sample: s.sample, msgs: j.msgs, pending: s.pending}
		if e.draining() || ctx.Err() != nil {
			e.hand(results, result{pending: s.pending, key: one.key(), unstarted: true})
			continue
		}
		r := e.do(ctx, wait, route, one)
		r.pending, r.key = s.pending, one.key()
		e.hand(results, r)
	}
}

// trackerFor is the tracker of a request's i-th result: the request's own
// for the first, which streamed it and holds its slot; for each other one
// of its own that holds no slot, so that every key is counted done or
// failed and the request is in flight once.
func (e *Engine) trackerFor(i int, tr *runstats.Tracker) *runstats.Tracker {
	if i == 0 {
		return tr
	}
	t := e.stats.Begin()
	t.Release()
	return t
}

// hand gives r to the writer; its tracker leaves the slot then, as the
// worker does with its one result.
func (e *Engine) hand(results chan<- result, r result) {
	results <- r
	if r.tr != nil {
		r.tr.Release()
	}
}

// askAlone says whether choice ch is not its sample's record as it is:
// cut at max_tokens where the job wants the whole answer, or not in the
// job's shape. Its usage is known only where the server counted its own
// tokens (its ids).
func (e *Engine) askAlone(j task, ch wire.Response) bool {
	chk := ch
	if chk.UsageKnown = ch.TokenIDs != nil; chk.UsageKnown {
		chk.CompletionTokens = len(ch.TokenIDs)
	}
	req := wire.Request{Sampling: e.opts.Sampling, Params: j.prompt.Params}
	return e.moreRoom(req, chk) > 0 || e.misshapen(ch) != nil
}

// ignoredN notes a server that answered one choice to a request for n:
// said once, and every sample asked alone from then on.
func (e *Engine) ignoredN(n int) {
	if !e.nIgnored.Swap(true) {
		fmt.Fprintf(e.opts.Log, "note: the server answered 1 choice to a request for %d (it ignores n): the one answer is kept, and from now on each sample is its own request, sent back to back (generation.n_per_request: false asks so from the start)\n", n)
	}
}
