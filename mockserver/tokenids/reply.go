package tokenids

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
)

// maxTopLogprobs is vLLM's default --max-logprobs: more alternatives are
// refused with a 400.
const maxTopLogprobs = 20

// Fields are the request fields that ask for tokens.
type Fields struct {
	ReturnTokenIDs         bool `json:"return_token_ids"`
	Logprobs               bool `json:"logprobs"`
	TopLogprobs            *int `json:"top_logprobs"`
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
}

// Check refuses what vLLM refuses, in its words.
func (f *Fields) Check() error {
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
	for i, piece := range Vocabulary {
		p.byID = append(p.byID, fmt.Appendf(nil, `{"token":"token_id:%d","logprob":`, PieceID(i)))
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

// Reply is what one request asked of tokens and what its answer has
// generated of them so far. Its methods write the token parts of the
// answer's JSON; on a nil Reply (nothing asked) they write what an answer
// without them has.
type Reply struct {
	ids    bool // return_token_ids, and the server honours it
	k      int  // alternatives a token; -1: no logprobs
	byID   bool // alternatives named "token_id:N"
	hash   uint64
	prompt []int32
	gen    []int32 // a plain answer's pieces, written at its end
}

// NewReply is what a request with fields f asks of tokens, nil when it
// asks for none. ignoreIDs answers as a server that does not know
// return_token_ids: without ids. hash identifies the prompt (the logprobs
// are a function of it); contents are its messages' texts, read only when
// ids are asked.
func NewReply(f *Fields, ignoreIDs bool, hash uint64, contents iter.Seq[string]) *Reply {
	t := &Reply{ids: f.ReturnTokenIDs && !ignoreIDs, k: -1, byID: f.ReturnTokensAsTokenIDs, hash: hash}
	if f.Logprobs {
		t.k = 0
		if f.TopLogprobs != nil {
			t.k = *f.TopLogprobs
		}
	}
	if !t.ids && t.k < 0 {
		return nil
	}
	if t.ids {
		t.prompt = prompt(contents)
	}
	return t
}

// IDs reports whether the answer carries token ids.
func (t *Reply) IDs() bool { return t != nil && t.ids }

// logprob is token i's: piece-independent, a pure function of the prompt
// and i, a float32 in [-8, 0) with all its digits; the j-th alternative is
// about j/2 below it.
func (t *Reply) logprob(i, j int) float32 {
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
	return (p + 7*j) % len(Vocabulary)
}

// appendEntry appends token i's logprobs entry (piece p).
func (t *Reply) appendEntry(b []byte, i, p int) []byte {
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
func (t *Reply) appendLogprobs(b []byte, first int, ps ...int32) []byte {
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

// AppendRoleTail closes a stream's role chunk: no token of its own, the
// prompt's ids at the top level.
func (t *Reply) AppendRoleTail(b []byte) []byte {
	b = append(b, `,"logprobs":null,"finish_reason":null`...)
	if !t.ids {
		return append(b, "}]}\n\n"...)
	}
	b = append(b, `,"token_ids":[]}],"prompt_token_ids":`...)
	b = appendIDs(b, t.prompt)
	return append(b, "}\n\n"...)
}

// AppendTokenTail closes token i's chunk (piece p, the answer's last when
// length): its logprobs, its finish, its id.
func (t *Reply) AppendTokenTail(b []byte, i, p int, length bool) []byte {
	b = append(b, `,"logprobs":`...)
	b = t.appendLogprobs(b, i, int32(p))
	if length {
		b = append(b, `,"finish_reason":"length","stop_reason":null`...)
	} else {
		b = append(b, `,"finish_reason":null`...)
	}
	if t.ids {
		b = append(b, `,"token_ids":[`...)
		b = strconv.AppendInt(b, int64(PieceID(p)), 10)
		b = append(b, ']')
	}
	return append(b, "}]}\n\n"...)
}

// AppendIDsTail closes a chunk of a tool answer, which has no logprobs:
// its finish ("": null), its tokens' ids when they are asked.
func (t *Reply) AppendIDsTail(b []byte, finish string, ids []int32) []byte {
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

// Note records a plain answer's generated piece.
func (t *Reply) Note(p int) {
	if t != nil {
		t.gen = append(t.gen, int32(p))
	}
}

// AppendChoiceLogprobs appends a plain choice's logprobs value: its
// noted pieces', null without logprobs.
func (t *Reply) AppendChoiceLogprobs(b []byte) []byte {
	var gen []int32
	if t != nil {
		gen = t.gen
	}
	return t.appendLogprobs(b, 0, gen...)
}

// AppendChoiceIDs appends a plain choice's `,"token_ids":[...]`.
func (t *Reply) AppendChoiceIDs(b []byte) []byte {
	if t == nil || !t.ids {
		return b
	}
	b = append(b, `,"token_ids":[`...)
	for i, p := range t.gen {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(PieceID(int(p))), 10)
	}
	return append(b, ']')
}

// AppendPromptIDs appends a plain answer's top-level
// `,"prompt_token_ids":[...]`.
func (t *Reply) AppendPromptIDs(b []byte) []byte {
	if !t.IDs() {
		return b
	}
	b = append(b, `,"prompt_token_ids":`...)
	return appendIDs(b, t.prompt)
}
