// Package jsonlex is the JSON lexing under the wire client's hand-written
// answer scanner: a cursor over bytes that reads strings and their escapes,
// numbers, literals and keys, and skips a value of any shape, each as
// encoding/json reads them (the scanner's differential fuzzers hold it to
// encoding/json). It allocates nothing.
package jsonlex

import (
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxSkipDepth bounds the nesting SkipValue validates; deeper input fails
// it, and the scanner hands such input to its reference decoder, which has
// its own (larger) limit.
const maxSkipDepth = 256

// Cursor is a position I in the JSON text B.
type Cursor struct {
	B []byte
	I int
}

// strSpecial marks the bytes at which str stops looking at a string
// quickly: its end, an escape, a control character (invalid in JSON) and
// the start of a non-ASCII sequence.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// str reads a string at the cursor, validating it as JSON does: no control
// characters, only the escapes \" \\ \/ \b \f \n \r \t \uXXXX.
func (s *Cursor) Str() (Span, bool) {
	b := s.B
	if s.I >= len(b) || b[s.I] != '"' {
		return Span{}, false
	}
	sp := Span{Lo: s.I + 1}
	i := sp.Lo
	for {
		i = plainWords(b, i)
		for i < len(b) && !strSpecial[b[i]] {
			i++
		}
		if i >= len(b) {
			return Span{}, false
		}
		switch c := b[i]; {
		case c == '"':
			sp.Hi = i
			s.I = i + 1
			return sp, true
		case c == '\\':
			sp.Esc = true
			if i+1 >= len(b) {
				return Span{}, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return Span{}, false
				}
				i += 6
			default:
				return Span{}, false
			}
		case c < 0x20:
			return Span{}, false
		default:
			sp.High = true
			i++
		}
	}
}

// plainWords skips, eight bytes at a time, the words of b from i that hold
// no byte strSpecial marks, and returns where the first other word starts
// (or where fewer than eight bytes are left); Str's byte loop reads on
// from there. A string's text is most of a chunk's bytes, and a byte at a
// time it was a quarter of decoding one (BenchmarkDecodeChunk).
func plainWords(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		quote, esc := w^(ones*'"'), w^(ones*'\\')
		// A byte's high bit in special is set when the byte is a quote or
		// a backslash (zero after the xor), below 0x20, or itself >= 0x80.
		// Borrows make false positives only above a true one, so a word
		// with none of these bytes is never flagged.
		special := (quote-ones)&^quote | (esc-ones)&^esc | (w-ones*0x20)&^w | w
		if special&highs != 0 {
			return i
		}
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipValue validates and skips one JSON value of any kind. Nesting is
// tracked in a bit stack (1: object, 0: array) up to maxSkipDepth.
func (s *Cursor) SkipValue() bool {
	var stack [maxSkipDepth / 64]uint64
	depth := 0
	for {
		// A value is expected at the cursor.
		s.WS()
		if s.I >= len(s.B) {
			return false
		}
		switch s.B[s.I] {
		case '{', '[':
			obj := s.B[s.I] == '{'
			s.I++
			if obj && s.Consume('}') || !obj && s.Consume(']') {
				break // empty: a whole value
			}
			if depth == maxSkipDepth {
				return false
			}
			if obj {
				stack[depth/64] |= 1 << (depth % 64)
			} else {
				stack[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			if obj && !s.Key() {
				return false
			}
			continue // the first member's value
		case '"':
			if _, ok := s.Str(); !ok {
				return false
			}
		case 't':
			if !s.Literal("true") {
				return false
			}
		case 'f':
			if !s.Literal("false") {
				return false
			}
		case 'n':
			if !s.Literal("null") {
				return false
			}
		default:
			if !s.Number() {
				return false
			}
		}
		// After a whole value: close containers until one continues.
		for {
			if depth == 0 {
				return true
			}
			obj := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			s.WS()
			if s.I >= len(s.B) {
				return false
			}
			c := s.B[s.I]
			if c == ',' {
				s.I++
				if obj && !s.Key() {
					return false
				}
				break
			}
			if obj && c == '}' || !obj && c == ']' {
				s.I++
				depth--
				continue
			}
			return false
		}
	}
}

// key reads an object key and its ':' inside a skipped value.
func (s *Cursor) Key() bool {
	s.WS()
	if _, ok := s.Str(); !ok {
		return false
	}
	return s.Consume(':')
}

func (s *Cursor) Literal(lit string) bool {
	if rest := s.B[s.I:]; len(rest) >= len(lit) && string(rest[:len(lit)]) == lit {
		s.I += len(lit)
		return true
	}
	return false
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Cursor) Number() bool {
	b, i := s.B, s.I
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.I = i
	return true
}

// appendSpan appends the decoded text of sp. Plain text (no escape, valid
// UTF-8) is copied as is, as encoding/json returns it.
func AppendSpan(dst, data []byte, sp Span) []byte {
	raw := data[sp.Lo:sp.Hi]
	if !sp.Esc && (!sp.High || utf8.Valid(raw)) {
		return append(dst, raw...)
	}
	return AppendUnquoted(dst, raw)
}

// appendUnquoted decodes the contents of a JSON string that str validated,
// exactly as encoding/json's unquoteBytes does: a \uXXXX surrogate that is
// not half of a valid pair and every byte of invalid UTF-8 become U+FFFD.
func AppendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // " \ /
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Span is a JSON string's contents, between its quotes, in the input.
// Absent and null are the empty span, which is what the reference's plain
// string fields make of them.
type Span struct {
	Lo, Hi int
	Esc    bool // contains a backslash escape
	High   bool // contains a byte >= 0x80 (maybe invalid UTF-8)
}

func (s Span) Empty() bool { return s.Lo == s.Hi }

func (s *Cursor) WS() {
	if s.I < len(s.B) && s.B[s.I] > ' ' {
		return // the common case: no white space at all
	}
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// consume skips c (after whitespace) and reports whether it was there.
func (s *Cursor) Consume(c byte) bool {
	s.WS()
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++
		return true
	}
	return false
}
