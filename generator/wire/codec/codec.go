// Package codec decodes what an OpenAI-compatible server answers, from the
// raw bytes of a plain body or of one stream event, and knows nothing of
// HTTP: the structs below are the definition of what is read (the
// reference decoder, encoding/json), and Scan is its fast path by hand for
// the fields every chunk carries, held to the same values by fuzzers.
// go-openai's own types drop vLLM's `reasoning` field, so nothing here uses
// them. Package wire turns a Delta into its Response or *Error.
package codec

import (
	"encoding/json"
)

// Delta is what one streamed chunk (or a plain answer) carries for
// choice 0.
type Delta struct {
	Model            string
	Reasoning        string // `reasoning`, else `reasoning_content` (see pickReasoning)
	Content          string // null -> ""
	FinishReason     string // "" until the last content chunk
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int  // usage.prompt_tokens_details.cached_tokens
	UsageKnown       bool // the chunk carried a usage object (not null)
	// The tokens (tokens.go): the top level's prompt_token_ids; choice
	// 0's token_ids, else its delta's; its logprobs.content. Empty: nil.
	PromptTokenIDs []int32
	TokenIDs       []int32
	Logprobs       Logprobs
	// ToolCalls: the delta's (message's) tool_calls (toolcalls.go); nil none.
	ToolCalls []ToolDelta
}

// HasText reports whether the chunk carried reasoning or content text, or
// a piece of a tool call: the unit the caller counts as a streamed token.
func (d *Delta) HasText() bool {
	return d.Reasoning != "" || d.Content != "" || len(d.ToolCalls) > 0
}

// textJSON is the text part of a message (plain) or a delta (stream). Plain
// string fields: JSON null leaves them "", which is what a record wants.
type textJSON struct {
	Content          string  `json:"content"`
	Reasoning        string  `json:"reasoning"`
	ReasoningContent string  `json:"reasoning_content"`
	TokenIDs         []int32 `json:"token_ids"` // vLLM puts them on the choice; a delta's count when it has none
	// ToolCalls: the scanner reads only null and [] (vLLM's plain
	// message always has it); a call goes to the reference.
	ToolCalls []toolCallJSON `json:"tool_calls"`
}

// logprobsJSON is a choice's logprobs (OpenAI's shape, as vLLM sends it):
// one entry per generated token. An entry's own token, its bytes and the
// alternatives' bytes are not read: token_ids name the tokens.
type logprobsJSON struct {
	Content []struct {
		Logprob     float32 `json:"logprob"`
		TopLogprobs []struct {
			Token   string  `json:"token"`
			Logprob float32 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"content"`
}

// tokens is what l carries as one chunk's (or answer's) Logprobs.
func (l *logprobsJSON) tokens() Logprobs {
	var out Logprobs
	if l == nil || len(l.Content) == 0 {
		return out
	}
	byID := true
	for i := range l.Content {
		e := &l.Content[i]
		out.Logprob = append(out.Logprob, e.Logprob)
		out.TopN = append(out.TopN, int32(len(e.TopLogprobs)))
		for _, a := range e.TopLogprobs {
			out.TopLogprob = append(out.TopLogprob, a.Logprob)
			id, ok := ParseTokenID(a.Token)
			byID = byID && ok
			out.TopIDs = append(out.TopIDs, id)
			out.TopTokens = append(out.TopTokens, a.Token)
		}
	}
	if byID {
		out.TopTokens = nil
	} else {
		out.TopIDs = nil
	}
	out.TopIDs, out.TopTokens, out.TopLogprob = nilIfEmpty(out.TopIDs), nilIfEmpty(out.TopTokens), nilIfEmpty(out.TopLogprob)
	return out
}

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// PromptTokensDetails says how many of the prompt's tokens the server
	// had cached (OpenAI's prompt caching, vLLM's prefix cache with
	// --enable-prompt-tokens-details): hosted servers bill them cheaper.
	PromptTokensDetails *promptTokensDetailsJSON `json:"prompt_tokens_details"`
}

type promptTokensDetailsJSON struct {
	CachedTokens int `json:"cached_tokens"`
}

// into sets d's usage from u; u nil (no usage sent) leaves d as it is.
func (u *usageJSON) into(d *Delta) {
	if u != nil {
		d.PromptTokens, d.CompletionTokens, d.UsageKnown = u.PromptTokens, u.CompletionTokens, true
		d.CachedTokens = u.cached()
	}
}

// choiceDelta is one choice's fields on base (the answer's model and
// prompt ids): t is its delta (a chunk's) or message (an answer's).
func choiceDelta(base Delta, t *textJSON, finish string, ids []int32, lp *logprobsJSON) Delta {
	base.Reasoning, base.Content, base.FinishReason = pickReasoning(t), t.Content, finish
	base.TokenIDs, base.Logprobs, base.ToolCalls = pickTokenIDs(ids, t.TokenIDs), lp.tokens(), toolDeltas(t.ToolCalls)
	return base
}

// cached is u's cached prompt tokens; 0 when the server sent no details.
func (u *usageJSON) cached() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// errorFieldsJSON are the fields by which a body says it is an error rather
// than an answer: OpenAI's {"error":{...}} and vLLM's flat
// {"object":"error","message":...,"code":400}.
type errorFieldsJSON struct {
	Object  string          `json:"object"`
	Error   json.RawMessage `json:"error"`
	Message json.RawMessage `json:"message"`
}

// isError says the body is an error rather than an answer.
func (f *errorFieldsJSON) isError() bool {
	return len(f.Error) > 0 && string(f.Error) != "null" || f.Object == "error"
}

type chunkJSON struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int           `json:"index"`
		Delta        textJSON      `json:"delta"`
		FinishReason string        `json:"finish_reason"`
		TokenIDs     []int32       `json:"token_ids"`
		Logprobs     *logprobsJSON `json:"logprobs"`
	} `json:"choices"`
	Usage          *usageJSON `json:"usage"`
	PromptTokenIDs []int32    `json:"prompt_token_ids"`
	errorFieldsJSON
}

type responseJSON struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int           `json:"index"`
		Message      textJSON      `json:"message"`
		FinishReason string        `json:"finish_reason"`
		TokenIDs     []int32       `json:"token_ids"`
		Logprobs     *logprobsJSON `json:"logprobs"`
	} `json:"choices"`
	Usage          *usageJSON `json:"usage"`
	PromptTokenIDs []int32    `json:"prompt_token_ids"`
	errorFieldsJSON
}

// pickTokenIDs is a choice's ids: its own token_ids (vLLM's place), else
// its delta's or message's.
func pickTokenIDs(choice, text []int32) []int32 {
	if len(choice) > 0 {
		return choice
	}
	return nilIfEmpty(text)
}

// pickReasoning chooses between the two names of the reasoning field. vLLM
// >= 0.11 sends `reasoning`, older vLLM and SGLang `reasoning_content`, and
// the versions in between send both with the same text (keep one). When both
// are there and differ, `reasoning` is the current name and wins; an empty
// `reasoning` next to a non-empty `reasoning_content` does not count as one.
func pickReasoning(t *textJSON) string {
	if t.Reasoning != "" {
		return t.Reasoning
	}
	return t.ReasoningContent
}

// DecodeChunk is the reference decoder of one streamed chunk (the JSON
// after "data: "): encoding/json into the declared structs, the definition
// of what Scan must return. err is encoding/json's; isError says the
// chunk is an error event (OpenAI's {"error":...} or vLLM's
// {"object":"error"}), for the caller to classify.
func DecodeChunk(data []byte) (d Delta, isError bool, err error) {
	var c chunkJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return Delta{}, false, err
	}
	if c.isError() {
		return Delta{}, true, nil
	}
	d = Delta{Model: c.Model, PromptTokenIDs: nilIfEmpty(c.PromptTokenIDs)}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n > 1 set through extra_body: only sample 0 is recorded
		}
		d = choiceDelta(d, &ch.Delta, ch.FinishReason, ch.TokenIDs, ch.Logprobs)
		break
	}
	c.Usage.into(&d)
	return d, false, nil
}

// DecodeAnswer is the reference decoder of a plain (non-streamed) answer:
// d is its choice 0 when picked, choices how many choices it had; err and
// isError as DecodeChunk's.
func DecodeAnswer(body []byte) (d Delta, choices int, picked, isError bool, err error) {
	var r responseJSON
	if err := json.Unmarshal(body, &r); err != nil {
		return Delta{}, 0, false, false, err
	}
	if r.isError() {
		return Delta{}, 0, false, true, nil
	}
	d = Delta{Model: r.Model, PromptTokenIDs: nilIfEmpty(r.PromptTokenIDs)}
	r.Usage.into(&d)
	for i := range r.Choices {
		ch := &r.Choices[i]
		if ch.Index != 0 {
			continue
		}
		return choiceDelta(d, &ch.Message, ch.FinishReason, ch.TokenIDs, ch.Logprobs), len(r.Choices), true, false, nil
	}
	return Delta{}, len(r.Choices), false, false, nil
}

// Choice is one choice of an answer or a chunk to a request that asked
// for several (OpenAI's n), by its index: its own text, finish, tool
// calls, token ids and logprobs. The usage and the model are the
// request's, on the top Delta that comes with the choices.
type Choice struct {
	Index int
	Delta
}

// DecodeChunkChoices is DecodeChunk keeping every choice, in the order
// sent: top carries the model, the usage and the prompt's ids; each
// choice's Delta its own fields (and the prompt's ids). Read by
// encoding/json alone: a request with n > 1 is one for n answers, and the
// scanner's fast path stays the one-choice chunk's.
func DecodeChunkChoices(data []byte) (top Delta, choices []Choice, isError bool, err error) {
	var c chunkJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return Delta{}, nil, false, err
	}
	if c.isError() {
		return Delta{}, nil, true, nil
	}
	top = Delta{Model: c.Model, PromptTokenIDs: nilIfEmpty(c.PromptTokenIDs)}
	for i := range c.Choices {
		ch := &c.Choices[i]
		choices = append(choices, Choice{Index: ch.Index, Delta: choiceDelta(top, &ch.Delta, ch.FinishReason, ch.TokenIDs, ch.Logprobs)})
	}
	c.Usage.into(&top)
	return top, choices, false, nil
}

// DecodeAnswerChoices is DecodeAnswer keeping every choice, as
// DecodeChunkChoices does for a chunk.
func DecodeAnswerChoices(body []byte) (top Delta, choices []Choice, isError bool, err error) {
	var r responseJSON
	if err := json.Unmarshal(body, &r); err != nil {
		return Delta{}, nil, false, err
	}
	if r.isError() {
		return Delta{}, nil, true, nil
	}
	top = Delta{Model: r.Model, PromptTokenIDs: nilIfEmpty(r.PromptTokenIDs)}
	for i := range r.Choices {
		ch := &r.Choices[i]
		choices = append(choices, Choice{Index: ch.Index, Delta: choiceDelta(top, &ch.Message, ch.FinishReason, ch.TokenIDs, ch.Logprobs)})
	}
	r.Usage.into(&top)
	return top, choices, false, nil
}
