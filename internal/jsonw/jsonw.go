// Package jsonw appends JSON by hand where encoding/json's reflection costs
// more than the value is worth: the request body (generator/wire/request.go)
// writes its strings with it.
package jsonw

import (
	"encoding/binary"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// SWAR constants: a byte repeated in every lane of a uint64.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// plain8 says whether none of the 8 bytes of x needs a look: no control
// character, quote, backslash or byte of a multi-byte rune. Each test is
// the classic "has a byte less than n" / "has a zero byte" of 64-bit lanes.
func plain8(x uint64) bool {
	ctl := (x - lanes01*0x20) &^ x
	quote := x ^ (lanes01 * '"')
	quote = (quote - lanes01) &^ quote
	bslash := x ^ (lanes01 * '\\')
	bslash = (bslash - lanes01) &^ bslash
	return (ctl|quote|bslash|x)&lanes80 == 0
}

// AppendString appends s as a JSON string, byte for byte as encoding/json
// writes it with HTML escaping off (json.Encoder.SetEscapeHTML(false)):
// quotes, backslashes and control characters escaped (\b, \f, \n, \r, \t
// short), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, everything
// else verbatim.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most text needs no escape: 8 bytes at a time while that holds
		// (BenchmarkAppendString, an answer's English: 283 -> 138 ns).
		for i+8 <= len(s) && plain8(binary.LittleEndian.Uint64([]byte(s[i:i+8]))) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
