package wire

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// A request for several answers at once (Request.N > 1, OpenAI's n): the
// server computes the prompt once and answers n choices, each read into a
// Response of its own (Response.Choices). It is read by encoding/json
// (codec.DecodeChunkChoices): the scanner's fast path, and the one-answer
// request's whole path, are untouched by it.
//
// The usage is the request's, split so that summing the choices counts
// each token once: the prompt's tokens (and cached tokens) go to the
// first choice alone; the completion tokens go to each choice as its own
// count where the server says it (token ids for every choice, adding up to
// the usage), else all to the first choice, the others saying 0.

// decodeResponseN decodes a plain answer to a request for n choices.
func decodeResponseN(body []byte, n int) (Response, error) {
	top, chs, isError, err := codec.DecodeAnswerChoices(body)
	switch {
	case err != nil:
		return Response{}, decodeError("decode response", err, body)
	case isError:
		return Response{}, bodyError(body)
	}
	resp := Response{Model: top.Model, PromptTokens: top.PromptTokens, CompletionTokens: top.CompletionTokens,
		CachedTokens: top.CachedTokens, UsageKnown: top.UsageKnown}
	for _, ch := range chs {
		if ch.Index < 0 || ch.Index >= n || slices.ContainsFunc(resp.Choices, func(r Response) bool { return r.Index == ch.Index }) {
			continue // not asked, or said twice: the first one counts
		}
		if err := checkFinish(ch.FinishReason); err != nil {
			return Response{}, err
		}
		c := plainResponse(&ch.Delta)
		c.Index = ch.Index
		resp.Choices = append(resp.Choices, c)
	}
	return finishChoices(resp)
}

// finishChoices orders resp's choices by index, splits the usage among
// them and makes resp's own fields its first choice's; an answer with no
// choice asked is incomplete.
func finishChoices(resp Response) (Response, error) {
	if len(resp.Choices) == 0 {
		return Response{}, &Error{Cause: CauseIncomplete, Retryable: true, Message: "response has no choice asked",
			Err: errors.New("decode response: no choice with an index below n")}
	}
	slices.SortFunc(resp.Choices, func(a, b Response) int { return a.Index - b.Index })
	perChoice := true
	sum := 0
	for i := range resp.Choices {
		c := &resp.Choices[i]
		perChoice = perChoice && c.TokenIDs != nil
		sum += len(c.TokenIDs)
	}
	perChoice = perChoice && (!resp.UsageKnown || sum == resp.CompletionTokens)
	for i := range resp.Choices {
		c := &resp.Choices[i]
		c.Model, c.UsageKnown = resp.Model, resp.UsageKnown
		// The choice's ids checked against what the request's usage says
		// of it: the whole prompt, and its own answer where known.
		c.PromptTokens, c.CompletionTokens = resp.PromptTokens, len(c.TokenIDs)
		if !perChoice {
			c.CompletionTokens = resp.CompletionTokens
		}
		if c.TokenIDs != nil || c.PromptTokenIDs != nil || c.Logprobs != nil {
			c.TokenIDsMismatch = tokenMismatch(false, c)
		}
		if i > 0 {
			c.PromptTokens, c.CachedTokens = 0, 0
			if !perChoice {
				c.CompletionTokens = 0
			}
		} else {
			c.CachedTokens = resp.CachedTokens
		}
	}
	first := resp.Choices[0]
	first.Choices, first.Chunks, first.TTFT = resp.Choices, resp.Chunks, resp.TTFT
	first.PromptTokens, first.CompletionTokens, first.CachedTokens = resp.PromptTokens, resp.CompletionTokens, resp.CachedTokens
	return first, nil
}

// decodeChunkN decodes one streamed chunk of a request for several
// choices.
func decodeChunkN(data []byte) (codec.Delta, []codec.Choice, error) {
	top, chs, isError, err := codec.DecodeChunkChoices(data)
	switch {
	case err != nil:
		return codec.Delta{}, nil, decodeError("decode chunk", err, data)
	case isError:
		return codec.Delta{}, nil, bodyError(data)
	}
	return top, chs, nil
}

// completeStreamN reads a streamed answer of n choices to its end: each
// chunk's choices go to their own answer by index. It is whole when every
// choice that came has its finish_reason.
func (c *Client) completeStreamN(ctx context.Context, body io.Reader, stall time.Duration, start time.Time, bound answerBound, n int, onDelta func(int)) (Response, error) {
	events := newSSEReader(body)
	defer events.release()
	answers := make([]*answer, n)
	var top answer // the request's model, usage and chunk count
	deltas := deltaBatch{report: onDelta, events: events}
	defer deltas.flush()
	whole := func() bool {
		seen := false
		for _, a := range answers {
			if a != nil && a.resp.FinishReason == "" {
				return false
			}
			seen = seen || a != nil
		}
		return seen
	}
	for {
		raw, err := events.next()
		if err != nil {
			if whole() {
				break
			}
			if errors.Is(err, io.EOF) {
				err = errStreamCut
			}
			return Response{}, c.failStream(ctx, stall, &top, err)
		}
		d, chs, err := decodeChunkN(raw)
		if err != nil {
			return Response{}, err
		}
		top.add(&d)
		for i := range chs {
			ch := &chs[i]
			if ch.Index < 0 || ch.Index >= n {
				continue
			}
			a := answers[ch.Index]
			if a == nil {
				a = &answer{}
				answers[ch.Index] = a
			}
			text := a.add(&ch.Delta)
			if text || ch.TokenIDs != nil || ch.Logprobs.Logprob != nil {
				if err := bound.check(a); err != nil {
					return Response{}, err
				}
			}
			if !text {
				continue
			}
			if top.resp.Chunks++; top.resp.Chunks == 1 {
				top.resp.TTFT = time.Since(start)
			}
			deltas.add()
		}
	}
	resp := top.result()
	prompt := resp.PromptTokenIDs // vLLM's come on the top of the first chunk
	for i, a := range answers {
		if a == nil {
			continue
		}
		if err := checkFinish(a.resp.FinishReason); err != nil {
			return Response{}, err
		}
		r := a.result()
		r.Index = i
		if r.PromptTokenIDs == nil {
			r.PromptTokenIDs = prompt
		}
		resp.Choices = append(resp.Choices, r)
	}
	return finishChoices(resp)
}

// MaxChoices bounds the choices one request asks (vLLM's default
// --max-num-seqs is 256, OpenAI's n at most 128).
const MaxChoices = 128
