package codec

import (
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

// Logprobs are the logprobs one chunk (or a plain answer) carries, one
// entry of Logprob and TopN per token; the alternatives of all its tokens
// are flat in TopIDs (or TopTokens) and TopLogprob, TopN[i] of them for
// token i.
//
// TopIDs holds them when every alternative of the chunk is named by id
// ("token_id:N", ParseTokenID); otherwise TopTokens holds every one's text
// and TopIDs is nil. Empty lists are nil.
type Logprobs struct {
	Logprob    []float32
	TopN       []int32
	TopIDs     []int32
	TopTokens  []string
	TopLogprob []float32
}

// tokenIDPrefix is how vLLM names a token by id in logprobs when asked to
// (return_tokens_as_token_ids).
const tokenIDPrefix = "token_id:"

// ParseTokenID reads vLLM's "token_id:N" (N a decimal int32 without
// leading zeros); ok is false for anything else, which is then a token's
// text.
func ParseTokenID(s string) (int32, bool) {
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

// TokenIDText is an id as vLLM names it, for alternatives kept as text.
func TokenIDText(id int32) string { return tokenIDPrefix + strconv.Itoa(int(id)) }

// TokenBuf is the scanner's scratch for one chunk's ids, logprobs and
// text (scan.go), reused chunk after chunk of a stream: what a chunk
// carries is appended here and handed on as slices (the text as strings
// that view it), valid until the next chunk; tokenAcc.add and answer.add
// copy what they keep. A plain answer's is its own, never reused.
type TokenBuf struct {
	// Stream says the buffer reads one stream's chunks in turn, all of one
	// Shape: Scan then remembers their repeated head and skips it (resume.go,
	// head). Off, a buffer used once copies no head.
	Stream bool

	prompt   []int32 // the top level's prompt_token_ids
	ids      []int32 // the picked choice's token_ids
	deltaIDs []int32 // its delta's (or message's) token_ids
	lp       []float32
	topN     []int32
	topIDs   []int32
	topLP    []float32
	text     []byte // the chunk's model, reasoning, content and finish reason, unescaped
	head     head   // the last chunk's head, to resume after (resume.go)
	// used: the chunk had a token list (the scanner set it). A chunk that
	// carries none, every chunk of a job that asks none, costs no reset,
	// mark or fill: the token scan added 2-4% to every chunk.
	used bool
}

func (b *TokenBuf) reset() {
	if !b.used {
		return
	}
	b.used = false
	b.prompt, b.ids, b.deltaIDs = b.prompt[:0], b.ids[:0], b.deltaIDs[:0]
	b.lp, b.topN, b.topIDs, b.topLP = b.lp[:0], b.topN[:0], b.topIDs[:0], b.topLP[:0]
}

// choiceMark is how much of a TokenBuf the choices before one held, so
// that a choice that is not the one recorded is taken back out.
type choiceMark struct{ ids, deltaIDs, lp, topN, topIDs, topLP int }

func (b *TokenBuf) mark() choiceMark {
	return choiceMark{len(b.ids), len(b.deltaIDs), len(b.lp), len(b.topN), len(b.topIDs), len(b.topLP)}
}

func (b *TokenBuf) truncate(m choiceMark) {
	if !b.used {
		return
	}
	b.ids, b.deltaIDs, b.lp = b.ids[:m.ids], b.deltaIDs[:m.deltaIDs], b.lp[:m.lp]
	b.topN, b.topIDs, b.topLP = b.topN[:m.topN], b.topIDs[:m.topIDs], b.topLP[:m.topLP]
}

// fill sets d's token fields from the buffer, as the reference decoder
// sets them: the choice's token_ids, else its delta's; empty lists nil.
func (b *TokenBuf) fill(d *Delta) {
	if !b.used {
		return
	}
	d.PromptTokenIDs = nilIfEmpty(b.prompt)
	d.TokenIDs = nilIfEmpty(b.ids)
	if d.TokenIDs == nil {
		d.TokenIDs = nilIfEmpty(b.deltaIDs)
	}
	d.Logprobs = Logprobs{
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
