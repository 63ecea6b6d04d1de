package wire

import (
	"encoding/json"
	"fmt"
	"strings"
)

// This file decodes what an OpenAI-compatible server answers, from the raw
// bytes of a plain body or of one stream event: go-openai's own types drop
// vLLM's `reasoning` field, so nothing here uses them. The structs below are
// the definition of what is read (the reference decoder); chunkscan.go is
// its fast path for the fields every chunk carries.

// chunkDelta is what one streamed chunk carries for choice 0.
type chunkDelta struct {
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
	Logprobs       tokenLogprobs
	// ToolCalls: the delta's (message's) tool_calls (toolcalls.go); nil none.
	ToolCalls []toolDelta
}

// hasText reports whether the chunk carried reasoning or content text, or
// a piece of a tool call: the unit the caller counts as a streamed token.
func (d *chunkDelta) hasText() bool {
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

// tokens is what l carries as one chunk's (or answer's) tokenLogprobs.
func (l *logprobsJSON) tokens() tokenLogprobs {
	var out tokenLogprobs
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
			id, ok := parseTokenID(a.Token)
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

// decodeChunk decodes one streamed chunk (the JSON after "data: "). A chunk
// that is an error event returns a classified *Error; undecodable bytes return
// an *Error with Cause "decode".
func decodeChunk(data []byte) (chunkDelta, error) {
	return decodeChunkInto(data, &tokenBuf{})
}

// decodeChunkInto is decodeChunk with the scratch of a stream: the
// chunk's token lists may be slices of tb, valid until its next use.
func decodeChunkInto(data []byte, tb *tokenBuf) (chunkDelta, error) {
	// The hand-written scanner (chunkscan.go) answers the ordinary chunk;
	// anything it cannot vouch for is decoded by encoding/json.
	if d, _, ok := scanAnswer(data, chunkShape, tb); ok {
		return d, nil
	}
	return decodeChunkReference(data)
}

// decodeChunkReference is decodeChunk by encoding/json: the definition of
// what decodeChunk returns, which scanChunk must match exactly.
func decodeChunkReference(data []byte) (chunkDelta, error) {
	var c chunkJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return chunkDelta{}, decodeError("decode chunk", err, data)
	}
	if e := bodyError(&c.errorFieldsJSON, data); e != nil {
		return chunkDelta{}, e
	}
	d := chunkDelta{Model: c.Model, PromptTokenIDs: nilIfEmpty(c.PromptTokenIDs)}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n > 1 set through extra_body: only sample 0 is recorded
		}
		d.Reasoning = pickReasoning(&ch.Delta)
		d.Content = ch.Delta.Content
		d.FinishReason = ch.FinishReason
		d.TokenIDs = pickTokenIDs(ch.TokenIDs, ch.Delta.TokenIDs)
		d.Logprobs = ch.Logprobs.tokens()
		d.ToolCalls = toolDeltas(ch.Delta.ToolCalls)
		break
	}
	if c.Usage != nil {
		d.PromptTokens, d.CompletionTokens, d.UsageKnown = c.Usage.PromptTokens, c.Usage.CompletionTokens, true
		d.CachedTokens = c.Usage.cached()
	}
	return d, nil
}

// decodeResponse decodes a plain (non-streamed) chat completion body. Only an
// answer that says how it finished is one: a body without choices or without
// a finish_reason is an *Error with Cause "incomplete", and "abort"/"error"
// finishes (vLLM aborting a request) are Cause "aborted"; both are retryable.
func decodeResponse(body []byte) (Response, error) {
	// The chunk scanner reads a plain answer too (its choice holds message
	// where a chunk's holds delta); what it cannot vouch for, and a body
	// with no choice 0, is the reference's.
	if d, picked, ok := scanAnswer(body, messageShape, &tokenBuf{}); ok && picked {
		if err := checkFinish(d.FinishReason); err != nil {
			return Response{}, err
		}
		return plainResponse(&d), nil
	}
	return decodeResponseReference(body)
}

// DecodeBody is decodeResponse for a plain answer that came another way
// than from Complete: a batch output line's response body.
func DecodeBody(body []byte) (Response, error) { return decodeResponse(body) }

// plainResponse is the Response a plain answer's decoded choice 0 makes;
// its token lists, the answer's own, are kept without a copy.
func plainResponse(d *chunkDelta) Response {
	resp := Response{Model: d.Model, Reasoning: d.Reasoning, Content: d.Content, FinishReason: d.FinishReason,
		PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens, CachedTokens: d.CachedTokens, UsageKnown: d.UsageKnown,
		ToolCalls: plainToolCalls(d.ToolCalls)}
	var t tokenAcc
	t.adopt(d)
	t.fill(&resp)
	return resp
}

// decodeResponseReference is decodeResponse by encoding/json: the
// definition of what decodeResponse returns, which scanAnswer must match.
func decodeResponseReference(body []byte) (Response, error) {
	var r responseJSON
	if err := json.Unmarshal(body, &r); err != nil {
		return Response{}, decodeError("decode response", err, body)
	}
	if e := bodyError(&r.errorFieldsJSON, body); e != nil {
		return Response{}, e
	}
	d := chunkDelta{Model: r.Model, PromptTokenIDs: nilIfEmpty(r.PromptTokenIDs)}
	if r.Usage != nil {
		d.PromptTokens, d.CompletionTokens, d.UsageKnown = r.Usage.PromptTokens, r.Usage.CompletionTokens, true
		d.CachedTokens = r.Usage.cached()
	}
	for i := range r.Choices {
		ch := &r.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d.Reasoning = pickReasoning(&ch.Message)
		d.Content = ch.Message.Content
		d.FinishReason = ch.FinishReason
		if err := checkFinish(d.FinishReason); err != nil {
			return Response{}, err
		}
		d.TokenIDs = pickTokenIDs(ch.TokenIDs, ch.Message.TokenIDs)
		d.Logprobs = ch.Logprobs.tokens()
		d.ToolCalls = toolDeltas(ch.Message.ToolCalls)
		return plainResponse(&d), nil
	}
	return Response{}, &Error{
		Cause: CauseIncomplete, Retryable: true,
		Message: "response has no choice 0",
		Err:     fmt.Errorf("decode response: no choice with index 0 in %d choices", len(r.Choices)),
	}
}

// checkFinish tells whether a finish_reason ends a complete answer. vLLM
// reports a request it aborted (engine restart, preemption gone wrong) with
// "abort", and newer versions an internal failure with "error": the text is
// partial, so it is a retryable failure, not a record.
func checkFinish(reason string) error {
	switch reason {
	case "":
		return &Error{Cause: CauseIncomplete, Retryable: true, Message: "answer has no finish_reason",
			Err: fmt.Errorf("decode response: choices[0].finish_reason: missing")}
	case "abort", "error":
		return &Error{Cause: CauseAborted, Retryable: true, Message: "server finished the answer with " + reason,
			Err: fmt.Errorf("decode response: choices[0].finish_reason: %q", reason)}
	}
	return nil
}

// bodyError returns the classified error a 2xx body or chunk carries, or nil.
func bodyError(f *errorFieldsJSON, raw []byte) *Error {
	hasError := len(f.Error) > 0 && string(f.Error) != "null"
	if !hasError && f.Object != "error" {
		return nil
	}
	status := errorCode(raw)
	e := &Error{Status: status, Message: errorMessage(raw)}
	e.Err = fmt.Errorf("server error event: %s", e.Message)
	if status != 0 {
		e.Cause, e.Retryable = httpCause(status), retryableStatus(status)
	} else {
		e.Cause, e.Retryable = CauseStreamErr, true
	}
	return e
}

// errorCode is the HTTP-like status in an error body's "code" (top level for
// vLLM, under "error" for OpenAI's shape), when it is a number in 400..599.
func errorCode(raw []byte) int {
	var top struct {
		Code  json.RawMessage `json:"code"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return 0
	}
	code := top.Code
	if len(top.Error) > 0 {
		var inner struct {
			Code json.RawMessage `json:"code"`
		}
		if json.Unmarshal(top.Error, &inner) == nil && len(inner.Code) > 0 {
			code = inner.Code
		}
	}
	var n int
	if json.Unmarshal(code, &n) == nil && n >= 400 && n <= 599 {
		return n
	}
	return 0
}

// maxQuoted bounds the bytes of bad input quoted in a decode error.
const maxQuoted = 120

func decodeError(what string, err error, data []byte) *Error {
	q := string(data)
	if len(q) > maxQuoted {
		q = q[:maxQuoted] + "..."
	}
	// A 2xx body that is not a chat completion is the server's or a proxy's
	// fault, not the request's: worth another attempt within the budget.
	return &Error{
		Cause: CauseDecode, Retryable: true,
		Message: fmt.Sprintf("%s: %v", what, err),
		Err:     fmt.Errorf("%s: %w (input %q)", what, err, q),
	}
}

// answer accumulates a streamed answer chunk by chunk.
type answer struct {
	reasoning, content strings.Builder
	toks               tokenAcc
	tools              toolAcc
	resp               Response
}

// add folds one chunk in and reports whether it carried text. A chunk's
// tokens count whether or not it carried text (vLLM sends the ids of text
// its parsers held back in a chunk of empty text).
func (a *answer) add(d *chunkDelta) bool {
	if a.resp.Model == "" {
		a.resp.Model = d.Model
	}
	if d.FinishReason != "" {
		a.resp.FinishReason = d.FinishReason
	}
	if d.UsageKnown {
		a.resp.PromptTokens, a.resp.CompletionTokens, a.resp.UsageKnown = d.PromptTokens, d.CompletionTokens, true
		a.resp.CachedTokens = d.CachedTokens
	}
	if d.PromptTokenIDs != nil || d.TokenIDs != nil || d.Logprobs.Logprob != nil {
		a.toks.add(d) // a job that asks no ids has none: no call per chunk
	}
	if !d.hasText() {
		return false
	}
	a.reasoning.WriteString(d.Reasoning)
	a.content.WriteString(d.Content)
	if d.ToolCalls != nil {
		a.tools.add(d.ToolCalls)
	}
	a.resp.Chunks++
	return true
}

// result is the accumulated answer.
func (a *answer) result() Response {
	r := a.resp
	r.Reasoning = a.reasoning.String()
	r.Content = a.content.String()
	r.ToolCalls = a.tools.result()
	a.toks.fill(&r)
	return r
}
