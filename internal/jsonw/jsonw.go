// Package jsonw appends JSON by hand where encoding/json's reflection costs
// more than the value is worth: the request body (generator/request.go) and
// the record's JSONL line (sink/recordjson.go) write their strings with it.
package jsonw

import "unicode/utf8"

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, byte for byte as encoding/json
// writes it with HTML escaping off (json.Encoder.SetEscapeHTML(false)):
// quotes, backslashes and control characters escaped (\b, \f, \n, \r, \t
// short), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, everything
// else verbatim.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
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
