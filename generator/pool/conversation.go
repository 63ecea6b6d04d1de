package pool

import (
	"encoding/json"
	"iter"
	"strconv"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// conversation is one key's requests while its slot asks them, and what
// their answers add up to. A job that answers the first turn sends one
// request (last); a job that regenerates whole conversations asks, per
// segment of the row (its turns from a user turn to the next user turn),
// until the model answers in text, with the model's own earlier answers in
// place of the dataset's (their content only: reasoning is held back, as
// reasoning models' chat templates and SpecForge's regeneration do), and
// once more when the row ends in a user turn that no answer followed. Each
// call of the model is followed by the segment's next cached tool result
// (positional reuse, as speculators' response regeneration does: tools are
// not run); where the model leaves the row's path (divergence) the
// conversation ends there.
type conversation struct {
	full  []chat.Message  // the whole conversation, assistant turns as placeholders; nil: one request
	tools map[string]bool // the names of the tools the row offers
	last  []chat.Message  // what was sent for the latest turn

	final            wire.Response // the latest answer
	turns            []sink.Turn   // every answer of a whole conversation
	diverged         *sink.Divergence
	invalid          int // the tool calls with arguments not JSON, every turn's
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
func (c *conversation) requests() iter.Seq[[]chat.Message] {
	return func(yield func([]chat.Message) bool) {
		if c.full == nil {
			yield(c.last)
			return
		}
		sent := make([]chat.Message, 0, len(c.full)+1)
		for i := 0; i < len(c.full); {
			m := c.full[i]
			if m.Role != "assistant" && m.Role != "tool" {
				sent = append(sent, m)
				i++
				continue
			}
			end := segmentEnd(c.full, i)
			var ok bool
			if sent, ok = c.segment(yield, sent, c.full[i:end]); !ok {
				return
			}
			i = end
		}
		if n := len(sent); n > 0 && sent[n-1].Role != "assistant" {
			c.segment(yield, sent, nil)
		}
	}
}

// segmentEnd is the index of the turn after the segment's answers and
// results that start at i: the next user or system turn, or the end.
func segmentEnd(full []chat.Message, i int) int {
	for i < len(full) && (full[i].Role == "assistant" || full[i].Role == "tool") {
		i++
	}
	return i
}

// segment asks the model's answers to one segment, whose row turns (its
// placeholders and cached results) are row, after sent: until it answers
// in text (true, with its answer appended), diverges from the row or the
// run stops (false: the conversation ends).
func (c *conversation) segment(yield func([]chat.Message) bool, sent, row []chat.Message) ([]chat.Message, bool) {
	var calls, results []chat.Message // the row's placeholders, its cached results
	for _, m := range row {
		if m.Role == "tool" {
			results = append(results, m)
		} else {
			calls = append(calls, m)
		}
	}
	used := 0
	for k := 0; ; k++ {
		// Clipped: the next turn appends to its own copy, so what a
		// request (and the record) holds never changes under it.
		if !yield(sent[:len(sent):len(sent)]) {
			return sent, false
		}
		answer := c.turns[len(c.turns)-1]
		rowCalled := k < len(calls) && len(calls[k].ToolCalls) > 0
		if len(answer.ToolCalls) == 0 {
			if rowCalled {
				c.diverge(sink.DivergedAnswerForCall, "the row called "+calls[k].ToolCalls[0].Function.Name)
				return sent, false
			}
			return append(sent, chat.Message{Role: "assistant", Content: answer.Content}), true
		}
		call := answer.ToolCalls[0]
		switch {
		case len(answer.ToolCalls) > 1:
			c.diverge(sink.DivergedParallelCalls, strconv.Itoa(len(answer.ToolCalls))+" calls")
		case !c.tools[call.Function.Name]:
			c.diverge(sink.DivergedUnknownTool, call.Function.Name)
		case used == len(results):
			c.diverge(sink.DivergedMoreCalls, call.Function.Name)
		}
		if c.diverged != nil {
			return sent, false
		}
		sent = append(sent, chat.Message{Role: "assistant", Content: answer.Content, ToolCalls: answer.ToolCalls},
			chat.Message{Role: "tool", Content: results[used].Content, ToolCallID: call.ID})
		used++
	}
}

// toolNames are the names of the tools in tools, a row's tools list as
// sent (JSON text the dataset reader made: a list of {type, function}).
func toolNames(tools string) map[string]bool {
	if tools == "" {
		return nil
	}
	var list []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal([]byte(tools), &list) != nil {
		return nil // the request fails on it (wire: tools not JSON)
	}
	names := make(map[string]bool, len(list))
	for _, t := range list {
		names[t.Function.Name] = true
	}
	return names
}

// diverge ends the conversation at its latest answer, which left the row.
func (c *conversation) diverge(kind, detail string) {
	c.diverged = &sink.Divergence{Kind: kind, Turn: len(c.turns) - 1, Detail: detail}
}

// answered records the answer to msgs, which took attempts tries.
func (c *conversation) answered(msgs []chat.Message, resp wire.Response, attempts int) {
	c.last, c.final = msgs, resp
	calls := resp.ToolCalls
	invalid := sink.InvalidToolCalls(calls)
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
			ToolCalls:        calls,
			ToolCallsInvalid: invalid,
		})
	}
	c.invalid += invalid
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
