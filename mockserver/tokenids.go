package mockserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// The mock's token ids and logprobs, in vLLM's shapes (vLLM >= 0.10.2):
// with return_token_ids a plain answer carries prompt_token_ids at its top
// level and token_ids on its choice, a stream carries prompt_token_ids on
// its first (role) chunk and each token's id on its chunk's choice; with
// logprobs and top_logprobs K, each choice carries logprobs.content[], one
// entry per token with its logprob, bytes and K alternatives, named
// "token_id:N" with return_tokens_as_token_ids and by their text without.
//
// The ids are deterministic: a generated token's id is its vocabulary
// piece's (AnswerTokenID), so len(token_ids) == usage.completion_tokens and
// the ids spell the answer's text (TokenPiece); the prompt's are one a
// word of the messages (PromptTokenIDs), as many as usage.prompt_tokens.
// A tool answer (tools.go) is not made of pieces: its tokens are its
// text's bytes, byte b's id byteBase+b, so its ids spell its reasoning and
// then its call (ToolCallText) or its text, and a test tells a call's
// tokens by decoding them (TokenPiece).
// The logprobs are a pure function of the prompt and the token's place, so
// a retried request gets the same. Options.IgnoreTokenIDs makes the mock a
// server that does not know return_token_ids: it answers without ids.

// pieceBase is the id of vocabulary piece 0: the ids stay clear of those
// real vocabularies give their first bytes and special tokens.
const pieceBase = 1000

// byteBase is the id of byte 0 of a tool answer's text: 256 ids below the
// pieces'.
const byteBase = 500

// Prompt ids are promptBase + a word's hash mod promptRange, clear of the
// pieces' ids.
const (
	promptBase  = 2000
	promptRange = 148000
)

// emptyPromptID is the one id of a prompt without words (whose usage
// counts one token).
const emptyPromptID = 151643

// maxTopLogprobs is vLLM's default --max-logprobs: more alternatives are
// refused with a 400.
const maxTopLogprobs = 20

// AnswerTokenID is the id the mock generates for vocabulary piece i.
func AnswerTokenID(i int) int32 { return int32(pieceBase + i) }

// TokenPiece is the text of a generated token id, and whether the mock
// generates it: a vocabulary piece, or a tool answer's byte (one byte of
// a character of several).
func TokenPiece(id int32) (string, bool) {
	if b := int(id) - byteBase; b >= 0 && b < 256 {
		return string([]byte{byte(b)}), true
	}
	i := int(id) - pieceBase
	if i < 0 || i >= len(vocabulary) {
		return "", false
	}
	return vocabulary[i], true
}

// PromptTokenIDs are the prompt ids the mock answers for messages of these
// contents, in order: one a word (as usage.prompt_tokens counts them),
// each the hash of its word.
func PromptTokenIDs(contents ...string) []int32 {
	var ids []int32
	for _, c := range contents {
		ids = appendWordIDs(ids, c)
	}
	if len(ids) == 0 {
		ids = append(ids, emptyPromptID)
	}
	return ids
}

// appendWordIDs appends one id per word of s (words as countWords splits
// them).
func appendWordIDs(ids []int32, s string) []int32 {
	start := -1
	for i := 0; i <= len(s); i++ {
		space := i == len(s) || s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		switch {
		case !space && start < 0:
			start = i
		case space && start >= 0:
			h := fnvString(fnvOffset, s[start:i])
			ids = append(ids, int32(promptBase+h%promptRange))
			start = -1
		}
	}
	return ids
}

// textIDs are the ids of s's bytes: a tool answer's tokens.
func textIDs(s string) []int32 {
	ids := make([]int32, len(s))
	for i := range len(s) {
		ids[i] = byteBase + int32(s[i])
	}
	return ids
}

// tokenFields are the request fields that ask for tokens.
type tokenFields struct {
	ReturnTokenIDs         bool `json:"return_token_ids"`
	Logprobs               bool `json:"logprobs"`
	TopLogprobs            *int `json:"top_logprobs"`
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
}

// check refuses what vLLM refuses, in its words.
func (f *tokenFields) check() error {
	if f.TopLogprobs == nil {
		return nil
	}
	switch k := *f.TopLogprobs; {
	case k < 0:
		return errors.New("top_logprobs: must be a non-negative value")
	case k > 0 && !f.Logprobs:
		return errors.New("when using `top_logprobs`, `logprobs` must be set to true")
	case k > maxTopLogprobs:
		return fmt.Errorf("top_logprobs: requested sample logprobs of %d, which is greater than max allowed: %d", k, maxTopLogprobs)
	}
	return nil
}

// pieceJSON is each vocabulary piece's logprobs entry in both namings,
// split around its logprob: `{"token":NAME,"logprob":` and
// `,"bytes":[...]`.
type pieceJSON struct {
	byID, byText [][]byte // the head, up to the logprob
	bytes        [][]byte // the tail: its bytes, without the closing brace
}

var pieces = sync.OnceValue(func() *pieceJSON {
	p := &pieceJSON{}
	for i, piece := range vocabulary {
		p.byID = append(p.byID, fmt.Appendf(nil, `{"token":"token_id:%d","logprob":`, AnswerTokenID(i)))
		name, _ := json.Marshal(piece) // a string always marshals
		p.byText = append(p.byText, fmt.Appendf(nil, `{"token":%s,"logprob":`, name))
		b := []byte(`,"bytes":[`)
		for k, c := range []byte(piece) {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
		p.bytes = append(p.bytes, append(b, ']'))
	}
	return p
})

// tokenReply is what one request asked of tokens and what its answer has
// generated of them so far.
type tokenReply struct {
	ids    bool // return_token_ids, and the server honours it
	k      int  // alternatives a token; -1: no logprobs
	byID   bool // alternatives named "token_id:N"
	hash   uint64
	prompt []int32
	gen    []int32 // a plain answer's pieces, written at its end
}

// newTokenReply is nil when the request asks for no tokens.
func (s *Server) newTokenReply(req *chatRequest) *tokenReply {
	t := &tokenReply{ids: req.ReturnTokenIDs && !s.opts.IgnoreTokenIDs, k: -1, byID: req.ReturnTokensAsTokenIDs, hash: req.promptHash()}
	if req.Logprobs {
		t.k = 0
		if req.TopLogprobs != nil {
			t.k = *req.TopLogprobs
		}
	}
	if !t.ids && t.k < 0 {
		return nil
	}
	if t.ids {
		for _, m := range req.Messages {
			t.prompt = appendWordIDs(t.prompt, string(m.Content))
		}
		if len(t.prompt) == 0 {
			t.prompt = append(t.prompt, emptyPromptID)
		}
	}
	return t
}

// logprob is token i's: piece-independent, a pure function of the prompt
// and i, a float32 in [-8, 0) with all its digits; the j-th alternative is
// about j/2 below it.
func (t *tokenReply) logprob(i, j int) float32 {
	h := t.hash ^ uint64(i+1)*0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return -float32(h>>40+1)/(1<<21) - float32(j)/2
}

// appendLogprob writes a logprob as vLLM's JSON does: the float32 widened
// to a Python float and written shortest for that, 17 digits or so
// (-0.0123456791043282).
func appendLogprob(b []byte, lp float32) []byte {
	return strconv.AppendFloat(b, float64(lp), 'g', -1, 64)
}

// alternative j of piece p: the piece itself first, then others.
func alternative(p, j int) int {
	if j == 0 {
		return p
	}
	return (p + 7*j) % len(vocabulary)
}

// appendEntry appends token i's logprobs entry (piece p).
func (t *tokenReply) appendEntry(b []byte, i, p int) []byte {
	pj := pieces()
	head := pj.byText
	if t.byID {
		head = pj.byID
	}
	b = append(b, head[p]...)
	b = appendLogprob(b, t.logprob(i, 0))
	b = append(b, pj.bytes[p]...)
	b = append(b, `,"top_logprobs":[`...)
	for j := range t.k {
		if j > 0 {
			b = append(b, ',')
		}
		a := alternative(p, j)
		b = append(b, head[a]...)
		b = appendLogprob(b, t.logprob(i, j))
		b = append(b, pj.bytes[a]...)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendLogprobs appends a choice's logprobs value for tokens of pieces
// ps, the first being token first.
func (t *tokenReply) appendLogprobs(b []byte, first int, ps ...int32) []byte {
	if t == nil || t.k < 0 {
		return append(b, "null"...)
	}
	b = append(b, `{"content":[`...)
	for n, p := range ps {
		if n > 0 {
			b = append(b, ',')
		}
		b = t.appendEntry(b, first+n, int(p))
	}
	return append(b, "]}"...)
}

func appendIDs(b []byte, ids []int32) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, ']')
}

// appendRoleTail closes a stream's role chunk: no token of its own, the
// prompt's ids at the top level.
func (t *tokenReply) appendRoleTail(b []byte) []byte {
	b = append(b, `,"logprobs":null,"finish_reason":null`...)
	if !t.ids {
		return append(b, "}]}\n\n"...)
	}
	b = append(b, `,"token_ids":[]}],"prompt_token_ids":`...)
	b = appendIDs(b, t.prompt)
	return append(b, "}\n\n"...)
}

// appendTokenTail closes token i's chunk (piece p, the answer's last when
// length): its logprobs, its finish, its id.
func (t *tokenReply) appendTokenTail(b []byte, i, p int, length bool) []byte {
	b = append(b, `,"logprobs":`...)
	b = t.appendLogprobs(b, i, int32(p))
	if length {
		b = append(b, `,"finish_reason":"length","stop_reason":null`...)
	} else {
		b = append(b, `,"finish_reason":null`...)
	}
	if t.ids {
		b = append(b, `,"token_ids":[`...)
		b = strconv.AppendInt(b, int64(AnswerTokenID(p)), 10)
		b = append(b, ']')
	}
	return append(b, "}]}\n\n"...)
}

// appendIDsTail closes a chunk of a tool answer, which has no logprobs:
// its finish ("": null), its tokens' ids when they are asked.
func (t *tokenReply) appendIDsTail(b []byte, finish string, ids []int32) []byte {
	if finish == "" {
		b = append(b, `,"logprobs":null,"finish_reason":null`...)
	} else {
		b = append(b, `,"logprobs":null,"finish_reason":"`...)
		b = append(b, finish...)
		b = append(b, `","stop_reason":null`...)
	}
	if t != nil && t.ids {
		b = append(b, `,"token_ids":`...)
		b = appendIDs(b, ids)
	}
	return append(b, "}]}\n\n"...)
}

// note records a plain answer's generated piece.
func (t *tokenReply) note(p int) {
	if t != nil {
		t.gen = append(t.gen, int32(p))
	}
}

// pieces are a plain answer's generated pieces (none without a reply).
func (t *tokenReply) pieces() []int32 {
	if t == nil {
		return nil
	}
	return t.gen
}

// appendChoiceIDs appends a plain choice's `,"token_ids":[...]`.
func (t *tokenReply) appendChoiceIDs(b []byte) []byte {
	if t == nil || !t.ids {
		return b
	}
	b = append(b, `,"token_ids":[`...)
	for i, p := range t.gen {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(AnswerTokenID(int(p))), 10)
	}
	return append(b, ']')
}

// appendPromptIDs appends a plain answer's top-level
// `,"prompt_token_ids":[...]`.
func (t *tokenReply) appendPromptIDs(b []byte) []byte {
	if t == nil || !t.ids {
		return b
	}
	b = append(b, `,"prompt_token_ids":`...)
	return appendIDs(b, t.prompt)
}
