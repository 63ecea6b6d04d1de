package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// The answer's tokens: with Request.ReturnTokenIDs the request asks for
// vLLM's return_token_ids, and the answer carries prompt_token_ids (at the
// top of a plain answer, of a stream's first chunk) and token_ids (in each
// choice, a stream's concatenated; a delta's are read too); with
// Request.Logprobs K it asks for logprobs with K top_logprobs, named by id
// (return_tokens_as_token_ids: "token_id:N"), and each choice carries
// logprobs.content[], one entry per token. They are held as flat arrays
// while a stream arrives: at K alternatives a token costs 4 (id) + 4
// (logprob) + 8K (alternatives) + 4 (where its alternatives end) bytes, the
// arrays growing as append grows them.

// tokenLogprobs are the logprobs one chunk (or a plain answer) carries, one
// entry of Logprob and TopN per token; the alternatives of all its tokens
// are flat in TopIDs (or TopTokens) and TopLogprob, TopN[i] of them for
// token i.
//
// TopIDs holds them when every alternative of the chunk is named by id
// ("token_id:N", parseTokenID); otherwise TopTokens holds every one's text
// and TopIDs is nil. Empty lists are nil.
type tokenLogprobs struct {
	Logprob    []float32
	TopN       []int32
	TopIDs     []int32
	TopTokens  []string
	TopLogprob []float32
}

// tokenIDPrefix is how vLLM names a token by id in logprobs when asked to
// (return_tokens_as_token_ids).
const tokenIDPrefix = "token_id:"

// parseTokenID reads vLLM's "token_id:N" (N a decimal int32 without
// leading zeros); ok is false for anything else, which is then a token's
// text.
func parseTokenID(s string) (int32, bool) {
	digits, ok := strings.CutPrefix(s, tokenIDPrefix)
	if !ok || len(digits) == 0 || len(digits) > 10 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<31-1 {
		return 0, false
	}
	return int32(n), true
}

// tokenIDText is an id as vLLM names it, for alternatives kept as text.
func tokenIDText(id int32) string { return tokenIDPrefix + strconv.Itoa(int(id)) }

// tokenBuf is the scanner's scratch for one chunk's ids and logprobs
// (chunkscan.go), reused chunk after chunk of a stream: what a chunk
// carries is appended here and handed on as slices of it, valid until the
// next chunk, which tokenAcc.add copies from. A plain answer's is its own.
type tokenBuf struct {
	prompt   []int32 // the top level's prompt_token_ids
	ids      []int32 // the picked choice's token_ids
	deltaIDs []int32 // its delta's (or message's) token_ids
	lp       []float32
	topN     []int32
	topIDs   []int32
	topLP    []float32
	// used: the chunk had a token list (the scanner set it). A chunk that
	// carries none, every chunk of a job that asks none, costs no reset,
	// mark or fill: the token scan added 2-4% to every chunk.
	used bool
}

func (b *tokenBuf) reset() {
	if !b.used {
		return
	}
	b.used = false
	b.prompt, b.ids, b.deltaIDs = b.prompt[:0], b.ids[:0], b.deltaIDs[:0]
	b.lp, b.topN, b.topIDs, b.topLP = b.lp[:0], b.topN[:0], b.topIDs[:0], b.topLP[:0]
}

// choiceMark is how much of a tokenBuf the choices before one held, so
// that a choice that is not the one recorded is taken back out.
type choiceMark struct{ ids, deltaIDs, lp, topN, topIDs, topLP int }

func (b *tokenBuf) mark() choiceMark {
	return choiceMark{len(b.ids), len(b.deltaIDs), len(b.lp), len(b.topN), len(b.topIDs), len(b.topLP)}
}

func (b *tokenBuf) truncate(m choiceMark) {
	if !b.used {
		return
	}
	b.ids, b.deltaIDs, b.lp = b.ids[:m.ids], b.deltaIDs[:m.deltaIDs], b.lp[:m.lp]
	b.topN, b.topIDs, b.topLP = b.topN[:m.topN], b.topIDs[:m.topIDs], b.topLP[:m.topLP]
}

// fill sets d's token fields from the buffer, as the reference decoder
// sets them: the choice's token_ids, else its delta's; empty lists nil.
func (b *tokenBuf) fill(d *chunkDelta) {
	if !b.used {
		return
	}
	d.PromptTokenIDs = nilIfEmpty(b.prompt)
	d.TokenIDs = nilIfEmpty(b.ids)
	if d.TokenIDs == nil {
		d.TokenIDs = nilIfEmpty(b.deltaIDs)
	}
	d.Logprobs = tokenLogprobs{
		Logprob: nilIfEmpty(b.lp), TopN: nilIfEmpty(b.topN),
		TopIDs: nilIfEmpty(b.topIDs), TopLogprob: nilIfEmpty(b.topLP),
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

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
func (t *tokenAcc) add(d *chunkDelta) {
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
			t.topText[i] = tokenIDText(id)
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
			t.topText = append(t.topText, tokenIDText(id))
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
func (t *tokenAcc) adopt(d *chunkDelta) {
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
