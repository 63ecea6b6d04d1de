package pool

// A slot: one key asked to an answer or a final failure, retries inside
// the slot, a whole conversation's turns in sequence.

import (
	"context"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/sink"
)

// do runs one key to an answer or a final failure, retrying inside the slot.
// ctx bounds the requests; wait, which also ends on Drain, bounds the waits
// between them. A job that regenerates whole conversations asks the key's
// turns in sequence in this one slot (see conversation.go): the key is done
// when all its turns are, and a failure or a stop on any turn leaves it
// unwritten, to be asked whole again.
func (e *Engine) do(ctx, wait context.Context, route *router, j task) result {
	tr := e.stats.Begin()
	start := time.Now()
	if e.opts.KeyedContext {
		ctx = context.WithValue(ctx, keyCtx{}, j.key())
	}
	c := &conversation{last: j.msgs}
	if e.opts.Prompt.Whole() && len(j.prompt.Conversation) > 0 {
		c = &conversation{full: e.opts.Prompt.Messages(j.prompt.Conversation), tools: toolNames(j.prompt.Tools)}
	}
	for msgs := range c.requests() {
		resp, attempts, fail := e.ask(ctx, wait, route, tr, j, msgs)
		if attempts == 0 || fail != nil {
			if fail == nil {
				tr.Cancel()
				return result{}
			}
			fail.Attempts += c.attempts
			return result{tr: tr, cause: fail.Cause, fail: fail}
		}
		c.answered(msgs, resp, attempts)
		tr.TurnDone()
	}
	latency := time.Since(start)
	return result{rec: e.record(j, c, latency), tr: tr, outcome: c.outcome(latency, e.opts.Price)}
}

// ask sends one request of key j until it is answered (resp, attempts > 0),
// fails for good (fail), or the run stops (neither, attempts 0: the key is
// asked on resume). The answer is returned by value: a pointer to it cost
// an allocation per request.
// Each attempt goes to the endpoint route picks (router.go).
func (e *Engine) ask(ctx, wait context.Context, route *router, tr *runstats.Tracker, j task, msgs []sink.Message) (resp wire.Response, attempts int, fail *sink.ErrorRecord) {
	req := wire.Request{Sampling: e.opts.Sampling, Messages: wireMessages(msgs), Params: j.prompt.Params, Tools: j.prompt.Tools, Stream: e.opts.Stream}
	var onDelta func(int) // a plain answer has no deltas: no closure to allocate
	if req.Stream {
		onDelta = tr.Delta
	}
	// charged counts the attempts held against the prompt: not those that
	// failed because the whole server was away (see outage.go), nor, with
	// several endpoints, those that failed on one replica while another
	// could take the prompt at once (health.go). Those are bounded too, so a
	// prompt that crashes every server it is sent to cannot keep the run
	// busy forever.
	charged, excused, moved := 0, 0, 0
	var avoid tried // the endpoints this prompt failed on since its last charged attempt
	var pre prefixChain
	if route.several() {
		pre = chainOf(req.Messages) // placement by prefix (place.go)
	}
	// cut is the last answer cut at max_tokens that on_length: retry asked
	// again with more room: if the longer answer cannot be had (the server
	// refuses it as too long for its context, or fails for good), the cut
	// one is what on_length: keep would have recorded, and is kept.
	var cut wire.Response
	haveCut := false
	misshapen := 0 // answers not in the job's shape (shape.go)
	for attempt := 1; ; attempt++ {
		if attempt > 1 && e.draining() {
			// A retry would be a new request: the key is asked on resume.
			return wire.Response{}, 0, nil
		}
		l := route.pick(avoid, pre)
		ep := l.ep
		// Its share of the endpoint's rate limits first (pace.go): the
		// wait is in the slot, so the limits are back-pressure too.
		promptBytes, tokens := ep.pace.cost(req)
		if ep.pace.wait(wait, tokens) != nil {
			route.unpick(l)
			return wire.Response{}, 0, nil
		}
		tr.SendingTo(ep.stats)
		epoch := ep.gate.sent()
		r, err := ep.client.Complete(ctx, req, onDelta)
		if serverAnswered(err) {
			ep.gate.answered(epoch)
		}
		if err == nil {
			used := 0
			if r.UsageKnown {
				used = r.PromptTokens
			}
			ep.pace.answered(r.Limits, promptBytes, used)
		}
		if err == nil && !sameModel(e.opts.Sampling.Model, r.Model) {
			err = modelMismatch(ep.url, r.Model, e.opts.Sampling.Model)
		}
		var ce, fault *wire.Error
		if err != nil {
			ce = wire.Classify(err)
			if ctx.Err() == nil && replicaFault(ce) {
				fault = ce
			}
		}
		hold, paced, said := ep.pace.limited(ce)
		if paced {
			fault = nil // the server's pacing, not the replica's failure
		}
		route.release(l, tr.Origin(), r, err, fault)
		if err == nil {
			if next := e.moreRoom(req, r); next > 0 {
				// Cut at max_tokens, and the job asks for the whole
				// answer: again, with more room (a new request, so a
				// drain stops it like a retry). The cut answer is kept
				// in case the longer one cannot be had.
				tr.Retry(wire.CauseLength)
				req.MaxTokens = next
				cut, haveCut = r, true
				continue
			}
			if bad := e.misshapen(r); bad != nil {
				// Answered, but not in the shape asked: the prompt's
				// failure, asked again at once (no backoff: the server
				// is well) until SchemaRetries are used up.
				if misshapen++; misshapen > e.opts.SchemaRetries {
					return wire.Response{}, attempt, e.shapeFailure(j, attempt, bad)
				}
				tr.RetryBecause(shape.Cause, bad.Error())
				avoid = e.elsewhereNext(route, avoid, ep)
				continue
			}
			return r, attempt, nil
		}
		if ctx.Err() != nil || ce.Cause == wire.CauseCanceled {
			// Not a failure of the key: the run is stopping. Nothing is
			// written, so a resume asks again.
			return wire.Response{}, 0, nil
		}
		if paced {
			// A 429 that says when to come back: the endpoint is held
			// back until then, and the prompt is asked again, none of
			// its retry.max_attempts used. With several replicas it
			// goes to another at once, and, as a request moved off a
			// failing one, is not the record's attempt either.
			route.holdBack(ep, hold, said)
			tr.RetryBecause(ce.Cause, ce.Error())
			if route.several() {
				attempt--
			}
			continue
		}
		charged++
		if route.excusable(ce) && ep.gate != nil && excused < e.opts.Retry.MaxAttempts {
			// Is its server away? Then its gate closes, and the attempt
			// goes at once to another endpoint that is up, or, when none
			// is, waits until one is back.
			back, werr := ep.gate.trip(wait)
			if werr == nil && back != nil {
				werr = route.waitUp(wait)
			}
			if werr != nil {
				return wire.Response{}, 0, nil
			}
			if back != nil {
				charged--
				excused++
				tr.RetryBecause(ce.Cause, ce.Error())
				if route.several() {
					// Not the prompt's attempt: its replica went away
					// under it, and it goes to another. The stats count
					// the retry, by cause; the record's attempts do not.
					attempt--
				}
				continue // an endpoint is up: try at once
			}
		}
		if fault != nil && ce.Retryable && route.several() && moved < e.opts.Retry.MaxAttempts*len(route.eps) {
			// The replica failed it, and another well one can take it
			// now: there, at once and uncharged. Only when every
			// endpoint has failed it since its last charged attempt is
			// the attempt the prompt's.
			if avoid == nil {
				avoid = make(tried, len(route.eps))
			}
			avoid[ep.idx] = true
			if route.elsewhere(avoid) {
				charged--
				moved++
				attempt--
				tr.RetryBecause(ce.Cause, ce.Error())
				continue
			}
		}
		clear(avoid) // a charged attempt: the next may go anywhere
		if haveCut && (ce.Cause == wire.CauseTooLong || !ce.Retryable || charged >= e.opts.Retry.MaxAttempts) {
			if bad := e.misshapen(cut); bad != nil {
				return wire.Response{}, attempt, e.shapeFailure(j, attempt, bad)
			}
			return cut, attempt, nil
		}
		if !ce.Retryable || charged >= e.opts.Retry.MaxAttempts {
			return wire.Response{}, attempt, &sink.ErrorRecord{
				ID:        j.prompt.ID,
				Sample:    j.sample,
				Status:    ce.Status,
				Message:   ce.Message,
				Attempts:  attempt,
				Cause:     ce.Cause,
				CreatedAt: e.opts.Now().UTC(),
			}
		}
		tr.RetryBecause(ce.Cause, ce.Error())
		if !backoff.Sleep(wait, e.backoff(charged, ce.RetryAfter)) {
			return wire.Response{}, 0, nil
		}
	}
}

// moreRoom is the max_tokens to ask again with after r, the answer to req,
// or 0 to keep r as it is: on_length: retry, r cut at max_tokens, and more
// room that can help. An answer cut before max_tokens was stopped by a full
// context (llama.cpp ends a slot's answer with "length" when its context
// fills), and the same prompt would be cut at the same place; and a retry
// never asks for more than the context leaves after the prompt (vLLM would
// refuse it with a 400), so when nothing more fits, the answer is kept.
func (e *Engine) moreRoom(req wire.Request, r wire.Response) int {
	if r.FinishReason != "length" {
		return 0
	}
	next := e.opts.Sampling.MoreRoom(req.MaxTokens, req.Params)
	if next == 0 || !r.UsageKnown {
		return next
	}
	if r.CompletionTokens < req.MaxTokens {
		return 0
	}
	if ctx := e.opts.Context; ctx > 0 && r.PromptTokens > 0 {
		if next = min(next, ctx-r.PromptTokens); next <= req.MaxTokens {
			return 0
		}
	}
	return next
}

// backoff is the wait after the attempt-th failure: exponential with full
// jitter (so 200 slots hit by one 503 do not come back in lockstep), at least
// what the server asked for in Retry-After, but never more than max_backoff:
// a server's Retry-After: 3600 would otherwise put the slot to sleep for an
// hour.
func (e *Engine) backoff(attempt int, retryAfter time.Duration) time.Duration {
	p := backoff.Policy{Initial: e.opts.Retry.InitialBackoff, Max: e.opts.Retry.MaxBackoff}
	d := max(p.Delay(attempt), retryAfter)
	if e.opts.Retry.MaxBackoff > 0 {
		d = min(d, e.opts.Retry.MaxBackoff)
	}
	return d
}

func (e *Engine) record(j task, c *conversation, latency time.Duration) *sink.Record {
	resp := c.final
	model := resp.Model
	if model == "" {
		model = e.opts.Sampling.Model
	}
	calls := recordToolCalls(resp.ToolCalls)
	invalid := sink.InvalidToolCalls(calls)
	if c.full != nil {
		invalid = c.invalid
	}
	return &sink.Record{
		ID:               j.prompt.ID,
		Sample:           j.sample,
		Source:           j.prompt.Source,
		Messages:         c.last, // exactly what was sent (for the last turn)
		Reasoning:        resp.Reasoning,
		Content:          resp.Content,
		FinishReason:     resp.FinishReason,
		Model:            model,
		PromptTokens:     c.promptTokens,
		CompletionTokens: c.completionTokens,
		CachedTokens:     c.cachedTokens,
		Cost:             c.cost(e.opts.Price),
		LatencyMS:        float64(latency.Microseconds()) / 1000,
		TTFTMS:           float64(c.ttft.Microseconds()) / 1000,
		Attempts:         c.attempts,
		CreatedAt:        e.opts.Now().UTC(),
		PromptTokenIDs:   resp.PromptTokenIDs,
		TokenIDs:         resp.TokenIDs,
		TokenIDsMismatch: resp.TokenIDsMismatch,
		Logprobs:         recordLogprobs(resp.Logprobs),
		Turns:            c.turns,
		Tools:            j.prompt.Tools,
		ToolCalls:        calls,
		ToolCallsInvalid: invalid,
		Divergence:       c.diverged,
	}
}
