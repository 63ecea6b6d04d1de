package wire

import (
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// The answer's tokens as the record holds them: codec.TokenBuf reads each
// chunk's (package codec's tokens.go says how they are carried), and
// tokenAcc below gathers them.

// tokenAcc accumulates a stream's tokens chunk by chunk (answer.add), or
// takes a plain answer's whole.
type tokenAcc struct {
	prompt []int32
	ids    []int32
	lp     []float32
	topEnd []int32 // per token: the end of its alternatives in topIDs/topText and topLP
	topIDs []int32
	// topText, once an alternative came named by its text, holds every
	// alternative as text (those named by id as "token_id:N"), and topIDs
	// is dropped.
	topText []string
	topLP   []float32
}

// add folds one chunk's tokens in, copying them out of the chunk.
func (t *tokenAcc) add(d *codec.Delta) {
	if t.prompt == nil && d.PromptTokenIDs != nil {
		t.prompt = append(make([]int32, 0, len(d.PromptTokenIDs)), d.PromptTokenIDs...)
	}
	t.ids = append(t.ids, d.TokenIDs...)
	l := &d.Logprobs
	if len(l.Logprob) == 0 {
		return
	}
	t.lp = append(t.lp, l.Logprob...)
	if l.TopTokens != nil && t.topText == nil {
		t.topText = make([]string, len(t.topIDs), len(t.topIDs)+len(l.TopTokens))
		for i, id := range t.topIDs {
			t.topText[i] = codec.TokenIDText(id)
		}
		t.topIDs = nil
	}
	switch {
	case t.topText == nil:
		t.topIDs = append(t.topIDs, l.TopIDs...)
	case l.TopTokens != nil:
		t.topText = append(t.topText, l.TopTokens...)
	default:
		for _, id := range l.TopIDs {
			t.topText = append(t.topText, codec.TokenIDText(id))
		}
	}
	end := int32(len(t.topLP))
	t.topLP = append(t.topLP, l.TopLogprob...)
	for _, n := range l.TopN {
		end += n
		t.topEnd = append(t.topEnd, end)
	}
}

// adopt takes a plain answer's tokens, which are its own, without a copy.
func (t *tokenAcc) adopt(d *codec.Delta) {
	l := &d.Logprobs
	*t = tokenAcc{prompt: d.PromptTokenIDs, ids: d.TokenIDs, lp: l.Logprob, topIDs: l.TopIDs, topText: l.TopTokens, topLP: l.TopLogprob}
	if len(l.TopN) > 0 {
		t.topEnd = make([]int32, len(l.TopN))
		end := int32(0)
		for i, n := range l.TopN {
			end += n
			t.topEnd[i] = end
		}
	}
}

// tokens is how many token entries the answer holds so far: ids, and
// logprobs' tokens and alternatives, for answerBound.
func (t *tokenAcc) tokens() (ids, logprobs, alternatives int) {
	return len(t.ids), len(t.lp), len(t.topLP)
}

// fill sets r's tokens: the ids as they came, the logprobs as the record
// keeps them (Logprobs: each token's alternatives a slice of the flat
// arrays, not a copy).
func (t *tokenAcc) fill(r *Response) {
	r.PromptTokenIDs, r.TokenIDs = t.prompt, t.ids
	if len(t.lp) == 0 {
		return
	}
	l := &Logprobs{TokenLogprobs: t.lp, TopLogprobs: make([][]float32, len(t.topEnd))}
	if t.topText != nil {
		l.TopTokens = make([][]string, len(t.topEnd))
	} else {
		l.TopIDs = make([][]int32, len(t.topEnd))
	}
	start := int32(0)
	for i, end := range t.topEnd {
		l.TopLogprobs[i] = t.topLP[start:end:end]
		if t.topText != nil {
			l.TopTokens[i] = t.topText[start:end:end]
		} else {
			l.TopIDs[i] = t.topIDs[start:end:end]
		}
		start = end
	}
	r.Logprobs = l
}

// tokenMismatch says where an answer's tokens disagree with its usage or
// with each other ("" when they agree): where the server reports usage,
// the ids' counts must be usage's, and where logprobs came, one a token.
// An answer that was not asked for ids and carries none has nothing to
// check.
func tokenMismatch(asked bool, r *Response) string {
	if !asked && r.TokenIDs == nil && r.PromptTokenIDs == nil && r.Logprobs == nil {
		return ""
	}
	var problems []string
	if r.UsageKnown && len(r.TokenIDs) != r.CompletionTokens {
		problems = append(problems, fmt.Sprintf("%d token_ids, usage.completion_tokens %d", len(r.TokenIDs), r.CompletionTokens))
	}
	if r.UsageKnown && len(r.PromptTokenIDs) != r.PromptTokens {
		problems = append(problems, fmt.Sprintf("%d prompt_token_ids, usage.prompt_tokens %d", len(r.PromptTokenIDs), r.PromptTokens))
	}
	if r.Logprobs != nil && len(r.Logprobs.TokenLogprobs) != len(r.TokenIDs) {
		problems = append(problems, fmt.Sprintf("%d logprobs for %d token_ids", len(r.Logprobs.TokenLogprobs), len(r.TokenIDs)))
	}
	return strings.Join(problems, "; ")
}
