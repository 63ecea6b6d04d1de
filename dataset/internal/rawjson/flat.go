// Package rawjson reads a JSON row without encoding/json's decoder where it
// can do so with certainty: a flat object decoded (Flat), the raw values of
// an object's top-level fields found without decoding the rest (Fields), a
// raw value read as a row's id (ID). What it cannot read it reports as
// unknown, and package dataset asks encoding/json, which stays the
// reference.
package rawjson

import (
	"encoding/json"
	"unicode/utf8"
)

// Flat decodes the common row, one flat JSON object whose values
// are strings, numbers, true, false or null, into what encoding/json with
// UseNumber gives for it (json.Number for a number, as written), without
// its reflection and decoder state: about half of decodeObject's time
// (BenchmarkDecodeObject). ok is false for anything else, valid or not (a
// nested value, a \u escape, invalid UTF-8, an error): decodeObject then
// asks encoding/json, whose answer and error messages stay the reference.
// FuzzScanFlatObject holds the two to the same result.
func Flat(b []byte) (map[string]any, bool) {
	i := flatWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	r := make(map[string]any, 4)
	i = flatWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return r, flatWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		key, n, ok := scanString(b, i)
		if !ok {
			return nil, false
		}
		i = flatWS(b, n)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = flatWS(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		var v any
		switch c := b[i]; {
		case c == '"':
			s, n, ok := scanString(b, i)
			if !ok {
				return nil, false
			}
			v, i = s, n
		case c == '-' || (c >= '0' && c <= '9'):
			n := scanNumber(b, i)
			if n < 0 {
				return nil, false
			}
			v, i = json.Number(b[i:n]), n
		case hasWord(b, i, "true"):
			v, i = true, i+4
		case hasWord(b, i, "false"):
			v, i = false, i+5
		case hasWord(b, i, "null"):
			v, i = nil, i+4
		default:
			return nil, false
		}
		r[key] = v
		i = flatWS(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = flatWS(b, i+1)
		case '}':
			return r, flatWS(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func flatWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasWord(b []byte, i int, w string) bool {
	return len(b)-i >= len(w) && string(b[i:i+len(w)]) == w
}

// scanString reads the string whose quote is at b[i]: its value and the
// index after its closing quote. Only the escapes that stand for one ASCII
// byte are taken; \u, a raw control byte or invalid UTF-8 is not ok.
func scanString(b []byte, i int) (string, int, bool) {
	i++
	start := i
	ascii := true
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s := b[start:i]
			if !ascii && !utf8.Valid(s) {
				return "", 0, false
			}
			return string(s), i + 1, true
		case c == '\\':
			return scanEscaped(b, start)
		case c < 0x20:
			return "", 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		i++
	}
	return "", 0, false
}

// scanEscaped is scanString for a string with escapes, from its first byte.
func scanEscaped(b []byte, start int) (string, int, bool) {
	out := make([]byte, 0, 64)
	last := start
	for i := start; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			out = append(out, b[last:i]...)
			if !utf8.Valid(out) {
				return "", 0, false
			}
			return string(out), i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return "", 0, false
			}
			var e byte
			switch b[i+1] {
			case '"', '\\', '/':
				e = b[i+1]
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			default:
				return "", 0, false // \u and the invalid ones: encoding/json's
			}
			out = append(out, b[last:i]...)
			out = append(out, e)
			i += 2
			last = i
		case c < 0x20:
			return "", 0, false
		default:
			i++
		}
	}
	return "", 0, false
}

// scanNumber returns the index after the JSON number at b[i], or -1 when
// what is there is not one (-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?).
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
