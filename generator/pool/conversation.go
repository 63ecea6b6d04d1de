package pool

import (
	"iter"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// conversation is one key's requests while its slot asks them, and what
// their answers add up to. A job that answers the first turn sends one
// request (last); a job that regenerates whole conversations sends one per
// assistant turn of the row, each with the model's own earlier answers in
// place of the dataset's (their content only: reasoning is held back, as
// reasoning models' chat templates and SpecForge's regeneration do), and
// one more when the row ends in a user turn that no answer followed.
type conversation struct {
	full []sink.Message // the whole conversation, assistant turns as placeholders; nil: one request
	last []sink.Message // what was sent for the latest turn

	final            wire.Response // the latest answer
	turns            []sink.Turn   // every answer of a whole conversation
	answers          int
	promptTokens     int
	completionTokens int
	cachedTokens     int
	deltas           int
	attempts         int
	usageKnown       bool
	ttft             time.Duration // the first turn's
}

// requests yields the messages of each request in turn; the caller records
// each answer with answered before it asks for the next.
func (c *conversation) requests() iter.Seq[[]sink.Message] {
	return func(yield func([]sink.Message) bool) {
		if c.full == nil {
			yield(c.last)
			return
		}
		sent := make([]sink.Message, 0, len(c.full)+1)
		for _, m := range c.full {
			if m.Role != "assistant" {
				sent = append(sent, m)
				continue
			}
			// Clipped: the next turn appends to its own copy, so what a
			// request (and the record) holds never changes under it.
			if !yield(sent[:len(sent):len(sent)]) {
				return
			}
			sent = append(sent, sink.Message{Role: "assistant", Content: c.final.Content})
		}
		if n := len(sent); n > 0 && sent[n-1].Role != "assistant" {
			yield(sent[:n:n])
		}
	}
}

// answered records the answer to msgs, which took attempts tries.
func (c *conversation) answered(msgs []sink.Message, resp wire.Response, attempts int) {
	c.last, c.final = msgs, resp
	if c.full != nil {
		c.turns = append(c.turns, sink.Turn{
			Reasoning:        resp.Reasoning,
			Content:          resp.Content,
			FinishReason:     resp.FinishReason,
			PromptTokens:     resp.PromptTokens,
			CompletionTokens: resp.CompletionTokens,
			PromptTokenIDs:   resp.PromptTokenIDs,
			TokenIDs:         resp.TokenIDs,
			TokenIDsMismatch: resp.TokenIDsMismatch,
			Logprobs:         recordLogprobs(resp.Logprobs),
		})
	}
	if c.answers == 0 {
		c.ttft, c.usageKnown = resp.TTFT, resp.UsageKnown
	}
	c.usageKnown = c.usageKnown && resp.UsageKnown
	c.answers++
	c.promptTokens += resp.PromptTokens
	c.completionTokens += resp.CompletionTokens
	c.cachedTokens += resp.CachedTokens
	c.deltas += resp.Chunks
	c.attempts += attempts
}

// cost is what every turn's answer cost at price (nil: no price, 0): cost is
// linear in the tokens, so the sums' cost is the sum of the turns'.
func (c *conversation) cost(price *runstats.Price) float64 {
	if price == nil {
		return 0
	}
	return price.Cost(c.promptTokens, c.cachedTokens, c.completionTokens)
}

// outcome is the key's outcome for the stats: every turn's tokens.
func (c *conversation) outcome(latency time.Duration, price *runstats.Price) runstats.Outcome {
	return runstats.Outcome{
		PromptTokens:     c.promptTokens,
		CompletionTokens: c.completionTokens,
		Cost:             c.cost(price),
		UsageKnown:       c.usageKnown,
		Deltas:           c.deltas,
		FinishReason:     c.final.FinishReason,
		Latency:          latency,
		TTFT:             c.ttft,
		Attempts:         c.attempts,
	}
}
