package pool

// An answer in the shape the job asks (generation.response_format): its
// content is checked once the server has answered. One that is not is
// the prompt's failure, not the replica's: the replica answered, and its
// health counts the attempt as a success (the check comes after
// router.release). It is asked again at once, up to SchemaRetries times,
// then recorded in errors/ with the validator's message and the answer's
// first bytes. With several endpoints the next attempt goes to another
// well one when there is one: a replica whose answers are out of shape
// (started without structured outputs, say) answers at once, so it has
// the most headroom and would otherwise draw every retry.

import (
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// misshapen returns why r's content is not in the shape the job asks, or
// nil (also when the job asks for none, and when r calls a tool: the shape
// is the final answer's, and a call has no content to hold it).
func (e *Engine) misshapen(r wire.Response) error {
	if e.shape == nil || len(r.ToolCalls) > 0 {
		return nil
	}
	return e.shape.Check(r.Content)
}

// shapeFailure is the error record of key j after attempt attempts, the
// last answer's content not in the shape (why).
func (e *Engine) shapeFailure(j task, attempt int, why error) *sink.ErrorRecord {
	return &sink.ErrorRecord{
		ID:        j.prompt.ID,
		Sample:    j.sample,
		Message:   why.Error(),
		Attempts:  attempt,
		Cause:     shape.Cause,
		CreatedAt: e.opts.Now().UTC(),
	}
}

// elsewhereNext marks ep in avoid so that the next attempt goes to another
// well endpoint, and returns avoid; with one endpoint, or none other well,
// the next attempt may go anywhere.
func (e *Engine) elsewhereNext(route *router, avoid tried, ep *endpoint) tried {
	if !route.several() {
		return avoid
	}
	if avoid == nil {
		avoid = make(tried, len(route.eps))
	}
	avoid[ep.idx] = true
	if !route.elsewhere(avoid) {
		clear(avoid)
	}
	return avoid
}
