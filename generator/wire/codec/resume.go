package codec

import (
	"bytes"

	"github.com/synthgen/synthgen/internal/jsonlex"
)

// A stream's chunks repeat themselves: what the scanner read of the last
// one is kept in the stream's TokenBuf and the next one is read from it
// where their bytes agree (the head, then the text template).

// head is what the scanner knew of a stream's last chunk just before its
// choices: the bytes up to their value and the state those left. A
// stream's chunks repeat their head (id, object, created, model) byte for
// byte, and the scanner's state is a function of the bytes it read, so a
// chunk that begins with the same bytes resumes from that state instead of
// reading them again: the head was half of decoding a vLLM chunk.
// FuzzHeadResume holds a resumed scan to a fresh one; the figures are in
// docs/decisions/2026-12-stream-chunk-cost.md.
type head struct {
	bytes []byte
	f     answerFields
	seen  uint8
	valid bool
	text  textTemplate // the chunk after this head, but for its text
}

// textTemplate is the rest of a stream's last chunk after its head, read
// whole: the bytes before and after its one text string (a delta's
// content, reasoning or reasoning_content) and the fields the whole chunk
// left. A stream's chunks after the first differ only in that string as
// often as not: a chunk that is the head, pre, a string and post, byte for
// byte, is the template's chunk with another string in one place, and its
// fields are the template's with that string's span, which one Str reads.
// The choices were the other half of decoding a chunk (2,300 of 3,500
// instructions a chunk, docs/decisions/2026-12-stream-chunk-cost.md).
// FuzzTextResume holds a resumed scan to a fresh one.
type textTemplate struct {
	pre   []byte // from the head's end to the string's opening quote, included
	post  []byte // from the string's closing quote, included, to the end
	f     answerFields
	field int // the string's span in f.pick (chunkChoice.text)
	valid bool
}

// remember keeps the head just read (the cursor is at the choices' value),
// unless the head held token ids, which live in tb and are reset.
func (s *chunkScanner) remember(f *answerFields, seen uint8) {
	h := &s.tb.head
	if s.tb.used {
		h.valid = false
		return
	}
	h.bytes = append(h.bytes[:0], s.B[:s.I]...)
	h.f, h.seen, h.valid = *f, seen, true
	h.text.valid = false // it followed another head
	s.headEnd = s.I
}

// resume starts the scan after the remembered head when the chunk begins
// with it, the cursor at the choices' value, and reports whether it did;
// whole, that the chunk is its text template's with another string, read
// whole (resumeText), so the head's fields are not copied in for nothing.
func (s *chunkScanner) resume(f *answerFields, seen *uint8) (resumed, whole bool) {
	h := &s.tb.head
	if !h.valid || len(s.B) <= len(h.bytes) || !bytes.Equal(s.B[:len(h.bytes)], h.bytes) {
		return false, false
	}
	s.I = len(h.bytes)
	s.headEnd = s.I
	if s.resumeText(f) {
		return true, true
	}
	*f, *seen = h.f, h.seen
	return true, false
}

// resumeText reads the rest of a chunk that resumed after its head (the
// cursor at the choices' value) when it is the remembered text template
// with another string, and reports whether it did; if not, nothing was
// changed and the scan goes on from the head.
func (s *chunkScanner) resumeText(f *answerFields) bool {
	t := &s.tb.head.text
	at := s.I
	if !t.valid || !bytes.HasPrefix(s.B[at:], t.pre) {
		return false
	}
	s.I = at + len(t.pre) - 1 // the opening quote
	sp, ok := s.Str()
	if !ok || !bytes.Equal(s.B[sp.Hi:], t.post) {
		s.I = at
		return false
	}
	*f = t.f
	*f.pick.text(t.field) = sp
	s.I = len(s.B)
	return true
}

// rememberText keeps the chunk just read whole as the text template when
// it can stand for the next ones: its head was remembered or resumed, it
// held no token list (those live in tb and are reset), and its picked
// choice has exactly one text string, after which no other field's text
// lies (a span past the string would move with the string's length).
func (s *chunkScanner) rememberText(f *answerFields) {
	t := &s.tb.head.text
	t.valid = false
	if s.tb.used || !f.picked {
		return
	}
	field := -1
	for i := range textFields {
		if f.pick.text(i).Lo > 0 { // a string: null is the zero Span, and data[0] is '{'
			if field >= 0 {
				return
			}
			field = i
		}
	}
	if field < 0 {
		return
	}
	str := *f.pick.text(field)
	for _, sp := range [...]jsonlex.Span{f.model, f.object, f.pick.finish} {
		if !sp.Empty() && sp.Lo >= str.Hi {
			return
		}
	}
	t.pre = append(t.pre[:0], s.B[s.headEnd:str.Lo]...)
	t.post = append(t.post[:0], s.B[str.Hi:]...)
	t.f, t.field, t.valid = *f, field, true
}

// textFields counts a choice's text spans, chunkChoice.text's fields.
const textFields = 3

// text is the choice's text span i: content, reasoning, reasoning_content.
func (c *chunkChoice) text(i int) *jsonlex.Span {
	switch i {
	case 0:
		return &c.content
	case 1:
		return &c.reasoning
	}
	return &c.reasonAlt
}
