package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// This file makes package codec's decoding of an answer (a plain body,
// one stream event) a Response or a classified *Error, and accumulates a
// stream's chunks into one answer.

// decodeChunk decodes one streamed chunk (the JSON after "data: "). A chunk
// that is an error event returns a classified *Error; undecodable bytes return
// an *Error with Cause "decode".
func decodeChunk(data []byte) (codec.Delta, error) {
	return decodeChunkInto(data, &codec.TokenBuf{})
}

// decodeChunkInto is decodeChunk with the scratch of a stream: the
// chunk's token lists may be slices of tb, valid until its next use.
func decodeChunkInto(data []byte, tb *codec.TokenBuf) (codec.Delta, error) {
	// The hand-written scanner answers the ordinary chunk; anything it
	// cannot vouch for is decoded by encoding/json.
	if d, _, ok := codec.Scan(data, codec.ChunkShape, tb); ok {
		return d, nil
	}
	return decodeChunkReference(data)
}

// decodeChunkReference is decodeChunk by encoding/json (codec.DecodeChunk):
// the definition of what decodeChunk returns, which the scanner must match.
func decodeChunkReference(data []byte) (codec.Delta, error) {
	d, isError, err := codec.DecodeChunk(data)
	switch {
	case err != nil:
		return codec.Delta{}, decodeError("decode chunk", err, data)
	case isError:
		return codec.Delta{}, bodyError(data)
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
	if d, picked, ok := codec.Scan(body, codec.MessageShape, &codec.TokenBuf{}); ok && picked {
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
func plainResponse(d *codec.Delta) Response {
	resp := Response{Model: d.Model, Reasoning: d.Reasoning, Content: d.Content, FinishReason: d.FinishReason,
		PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens, CachedTokens: d.CachedTokens, UsageKnown: d.UsageKnown,
		ToolCalls: plainToolCalls(d.ToolCalls)}
	var t tokenAcc
	t.adopt(d)
	t.fill(&resp)
	return resp
}

// decodeResponseReference is decodeResponse by encoding/json
// (codec.DecodeAnswer): the definition of what decodeResponse returns,
// which the scanner must match.
func decodeResponseReference(body []byte) (Response, error) {
	d, choices, picked, isError, err := codec.DecodeAnswer(body)
	switch {
	case err != nil:
		return Response{}, decodeError("decode response", err, body)
	case isError:
		return Response{}, bodyError(body)
	case !picked:
		return Response{}, &Error{
			Cause: CauseIncomplete, Retryable: true,
			Message: "response has no choice 0",
			Err:     fmt.Errorf("decode response: no choice with index 0 in %d choices", choices),
		}
	}
	if err := checkFinish(d.FinishReason); err != nil {
		return Response{}, err
	}
	return plainResponse(&d), nil
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

// bodyError is the classified error a 2xx body or chunk carries, which
// the codec found to be an error event.
func bodyError(raw []byte) *Error {
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
//
// d's strings may be views of the stream's scratch (codec.Scan), so what
// is kept past this call is copied: the text into the builders, the model
// and the finish reason (once each an answer) cloned.
func (a *answer) add(d *codec.Delta) bool {
	if a.resp.Model == "" && d.Model != "" {
		a.resp.Model = strings.Clone(d.Model)
	}
	if d.FinishReason != "" && d.FinishReason != a.resp.FinishReason {
		a.resp.FinishReason = strings.Clone(d.FinishReason)
	}
	if d.UsageKnown {
		a.resp.PromptTokens, a.resp.CompletionTokens, a.resp.UsageKnown = d.PromptTokens, d.CompletionTokens, true
		a.resp.CachedTokens = d.CachedTokens
	}
	if d.PromptTokenIDs != nil || d.TokenIDs != nil || d.Logprobs.Logprob != nil {
		a.toks.add(d) // a job that asks no ids has none: no call per chunk
	}
	if !d.HasText() {
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
