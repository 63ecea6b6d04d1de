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
	UsageKnown       bool // the chunk carried a usage object (not null)
}

// hasText reports whether the chunk carried reasoning or content text: the
// unit the caller counts as a streamed token.
func (d *chunkDelta) hasText() bool { return d.Reasoning != "" || d.Content != "" }

// textJSON is the text part of a message (plain) or a delta (stream). Plain
// string fields: JSON null leaves them "", which is what a record wants.
type textJSON struct {
	Content          string `json:"content"`
	Reasoning        string `json:"reasoning"`
	ReasoningContent string `json:"reasoning_content"`
}

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
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
		Index        int      `json:"index"`
		Delta        textJSON `json:"delta"`
		FinishReason string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
	errorFieldsJSON
}

type responseJSON struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int      `json:"index"`
		Message      textJSON `json:"message"`
		FinishReason string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
	errorFieldsJSON
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
	// The hand-written scanner (chunkscan.go) answers the ordinary chunk;
	// anything it cannot vouch for is decoded by encoding/json.
	if d, ok := scanChunk(data); ok {
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
	d := chunkDelta{Model: c.Model}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n > 1 set through extra_body: only sample 0 is recorded
		}
		d.Reasoning = pickReasoning(&ch.Delta)
		d.Content = ch.Delta.Content
		d.FinishReason = ch.FinishReason
		break
	}
	if c.Usage != nil {
		d.PromptTokens, d.CompletionTokens, d.UsageKnown = c.Usage.PromptTokens, c.Usage.CompletionTokens, true
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
	if d, picked, ok := scanAnswer(body, messageShape); ok && picked {
		resp := Response{Model: d.Model, Reasoning: d.Reasoning, Content: d.Content, FinishReason: d.FinishReason,
			PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens, UsageKnown: d.UsageKnown}
		if err := checkFinish(resp.FinishReason); err != nil {
			return Response{}, err
		}
		return resp, nil
	}
	return decodeResponseReference(body)
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
	resp := Response{Model: r.Model}
	if r.Usage != nil {
		resp.PromptTokens, resp.CompletionTokens, resp.UsageKnown = r.Usage.PromptTokens, r.Usage.CompletionTokens, true
	}
	for i := range r.Choices {
		ch := &r.Choices[i]
		if ch.Index != 0 {
			continue
		}
		resp.Reasoning = pickReasoning(&ch.Message)
		resp.Content = ch.Message.Content
		resp.FinishReason = ch.FinishReason
		if err := checkFinish(resp.FinishReason); err != nil {
			return Response{}, err
		}
		return resp, nil
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
	resp               Response
}

// add folds one chunk in and reports whether it carried text.
func (a *answer) add(d *chunkDelta) bool {
	if a.resp.Model == "" {
		a.resp.Model = d.Model
	}
	if d.FinishReason != "" {
		a.resp.FinishReason = d.FinishReason
	}
	if d.UsageKnown {
		a.resp.PromptTokens, a.resp.CompletionTokens, a.resp.UsageKnown = d.PromptTokens, d.CompletionTokens, true
	}
	if !d.hasText() {
		return false
	}
	a.reasoning.WriteString(d.Reasoning)
	a.content.WriteString(d.Content)
	a.resp.Chunks++
	return true
}

// result is the accumulated answer.
func (a *answer) result() Response {
	r := a.resp
	r.Reasoning = a.reasoning.String()
	r.Content = a.content.String()
	return r
}
