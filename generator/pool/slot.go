package pool

// A slot: one key asked to an answer or a final failure, retries inside
// the slot, a whole conversation's turns in sequence.

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/synthgen/synthgen/chat"
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
// an allocation per request. Each attempt goes to the endpoint route picks
// (router.go); what follows it is decide's (attempt.go).
func (e *Engine) ask(ctx, wait context.Context, route *router, tr *runstats.Tracker, j task, msgs []chat.Message) (resp wire.Response, attempts int, fail *sink.ErrorRecord) {
	req := wire.Request{Sampling: e.opts.Sampling, Messages: msgs, Params: j.prompt.Params, Tools: j.prompt.Tools, Stream: e.opts.Stream}
	if j.more != nil {
		req.N = 1 + len(j.more)
	}
	var onDelta func(int) // a plain answer has no deltas: no closure to allocate
	if req.Stream {
		onDelta = tr.Delta
	}
	b := newBudget(e.opts.Retry.MaxAttempts, len(route.eps), e.opts.SchemaRetries)
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
	for {
		if b.attempt > 0 && e.draining() {
			// A retry would be a new request: the key is asked on resume.
			return wire.Response{}, 0, nil
		}
		b.send()
		a, ok := e.attempt(ctx, wait, route, tr, req, onDelta, avoid, pre)
		if !ok {
			return wire.Response{}, 0, nil
		}
		o := e.outcome(ctx, wait, route, &a, &avoid)
		o.haveCut = haveCut
		switch decide(o, &b) {
		case stepAnswered:
			return a.resp, b.attempt, nil
		case stepAgain:
			// Cut at max_tokens, and the job asks for the whole answer:
			// again, with more room (a new request, so a drain stops it
			// like a retry). The cut answer is kept in case the longer
			// one cannot be had.
			tr.Retry(wire.CauseLength)
			req.MaxTokens = a.next
			cut, haveCut = a.resp, true
		case stepElsewhere:
			if o.answered { // misshapen: asked again at once, elsewhere if it can
				tr.RetryBecause(shape.Cause, a.bad.Error())
				avoid = e.elsewhereNext(route, avoid, a.ep)
				continue
			}
			tr.RetryBecause(a.ce.Cause, a.ce.Error())
		case stepPaced:
			// The endpoint is held back until the server said (or its
			// backoff), and the prompt is asked again, none of its
			// retry.max_attempts used; with several replicas another
			// takes it at once.
			route.holdBack(a.ep, a.hold, a.said)
			tr.RetryBecause(a.ce.Cause, a.ce.Error())
		case stepMisshapen:
			return wire.Response{}, b.attempt, e.shapeFailure(j, b.attempt, a.bad)
		case stepStop:
			return wire.Response{}, 0, nil
		case stepKeepCut:
			clear(avoid)
			if bad := e.misshapen(cut); bad != nil {
				return wire.Response{}, b.attempt, e.shapeFailure(j, b.attempt, bad)
			}
			return cut, b.attempt, nil
		case stepFail:
			return wire.Response{}, b.attempt, &sink.ErrorRecord{
				ID:        j.prompt.ID,
				Sample:    j.sample,
				Status:    a.ce.Status,
				Message:   a.ce.Message,
				Attempts:  b.attempt,
				Cause:     a.ce.Cause,
				CreatedAt: e.opts.Now().UTC(),
			}
		case stepBackOff:
			clear(avoid) // a charged attempt: the next may go anywhere
			tr.RetryBecause(a.ce.Cause, a.ce.Error())
			if !backoff.Sleep(wait, e.backoff(b.charged, a.ce.RetryAfter)) {
				return wire.Response{}, 0, nil
			}
		}
	}
}

// sent is one attempt as it ended: the answer or its classified error, the
// endpoint it went to, and what the answer's checks and the pacer said.
type sent struct {
	ep    *endpoint
	resp  wire.Response
	err   error
	ce    *wire.Error // err classified; nil when answered
	fault *wire.Error // ce when it is the replica's failure
	next  int         // more room to ask again with (moreRoom), 0: none
	bad   error       // the answer is not in the job's shape
	paced bool
	hold  time.Duration
	said  string
}

// attempt sends req once, to the endpoint route picks after its share of
// the rate limits, and reports how it ended; ok false: the run stopped
// while it waited for its share.
func (e *Engine) attempt(ctx, wait context.Context, route *router, tr *runstats.Tracker, req wire.Request, onDelta func(int), avoid tried, pre prefixChain) (a sent, ok bool) {
	l := route.pick(avoid, pre)
	ep := l.ep
	a.ep = ep
	// Its share of the endpoint's rate limits first (package pace): the wait
	// is in the slot, so the limits are back-pressure too.
	promptBytes, tokens := ep.pace.Cost(req)
	if limit, never, first := ep.pace.NeverFits(tokens); never {
		// No wait lets it in: said at the first stated limit, instead
		// of 429s paced until the outage bound.
		route.unpick(l)
		a.ce = neverFitsError(req.MaxTokens, tokens, limit)
		a.err = a.ce
		if first {
			route.say(fmt.Sprintf("endpoint %s: %s; such requests fail at once", ep.url, a.ce.Message))
		}
		return a, true
	}
	if ep.pace.Wait(wait, tokens) != nil {
		route.unpick(l)
		return a, false
	}
	tr.SendingTo(ep.stats)
	epoch := ep.gate.sent()
	a.resp, a.err = ep.client.Complete(ctx, req, onDelta)
	if serverAnswered(a.err) {
		ep.gate.answered(epoch)
	}
	if a.err == nil {
		if p := e.opts.Price; p != nil { // billed, whatever becomes of the answer
			tr.Billed(p.Cost(a.resp.PromptTokens, a.resp.CachedTokens, a.resp.CompletionTokens))
		}
		used := 0
		if a.resp.UsageKnown {
			used = a.resp.PromptTokens
		}
		ep.pace.Answered(a.resp.Limits, promptBytes, used)
	}
	if a.err == nil && !sameModel(e.opts.Sampling.Model, a.resp.Model) {
		a.err = modelMismatch(ep.url, a.resp.Model, e.opts.Sampling.Model)
	}
	if a.err != nil {
		a.ce = wire.Classify(a.err)
		if ctx.Err() == nil && replicaFault(a.ce) {
			a.fault = a.ce
		}
	}
	a.hold, a.paced, a.said = ep.pace.Limited(a.ce)
	if a.paced {
		a.fault = nil // the server's pacing, not the replica's failure
	}
	route.release(l, tr.Origin(), a.resp, a.err, a.fault)
	if a.err == nil && req.N < 2 { // several choices are checked each (choices.go)
		if a.next = e.moreRoom(req, a.resp); a.next == 0 {
			a.bad = e.misshapen(a.resp)
		}
	}
	return a, true
}

// neverFitsError is the failure of a request of tokens (max_tokens among
// them) that the server's stated tokens a minute, limit, can never admit:
// not retryable, naming both numbers.
func neverFitsError(maxTokens, tokens, limit int) *wire.Error {
	return &wire.Error{Status: http.StatusTooManyRequests, Cause: "http_429", Message: fmt.Sprintf("max_tokens %d plus the prompt (%d tokens in all, as the server counts them) can never fit its stated limit of %d tokens a minute (x-ratelimit-limit-tokens): lower generation.max_tokens", maxTokens, tokens, limit)}
}

// outcome is what decide needs of attempt a; its two questions with
// effects (is the server away, can another replica take it) are asked
// only when decide reaches them. Its closures hold the endpoint, not a:
// a captured would move the whole attempt (its answer) to the heap on
// every request, answered ones too.
func (e *Engine) outcome(ctx, wait context.Context, route *router, a *sent, avoid *tried) outcome {
	o := outcome{answered: a.err == nil, moreRoom: a.next > 0, misshapen: a.bad != nil, several: route.several()}
	if o.answered {
		return o
	}
	ce := a.ce
	o.stopping = ctx.Err() != nil || ce.Cause == wire.CauseCanceled
	o.paced = a.paced
	o.excusable = route.excusable(ce) && a.ep.gate != nil
	o.fault = a.fault != nil && ce.Retryable
	o.retryable = ce.Retryable
	o.tooLong = ce.Cause == wire.CauseTooLong
	ep := a.ep
	o.away = func() (back, stop bool) {
		// Is its server away? Then its gate closes, and the attempt
		// goes at once to another endpoint that is up, or, when none
		// is, waits until one is back.
		ch, err := ep.gate.trip(wait)
		if err == nil && ch != nil {
			err = route.waitUp(wait)
		}
		return ch != nil, err != nil
	}
	o.elsewhere = func() bool {
		// The replica failed it: only when every endpoint has failed it
		// since its last charged attempt is the attempt the prompt's.
		if *avoid == nil {
			*avoid = make(tried, len(route.eps))
		}
		(*avoid)[ep.idx] = true
		return route.elsewhere(*avoid)
	}
	return o
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
	calls := resp.ToolCalls
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
