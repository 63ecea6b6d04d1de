package rawjson

// Reading a JSON row's id without decoding the row: the top-level fields of
// one object are walked, every value skipped but the ones asked for. What
// it cannot read with certainty (an escaped field name, a value of another
// type, a line that does not look like one object) it reports as unknown,
// and the row is decoded as before: the scan only ever shortens the way to
// the answer the decoder would give.

import (
	"bytes"
	"encoding/json"
	"unsafe"

	"github.com/synthgen/synthgen/dataset/internal/number"
)

// Fields finds the last occurrence (encoding/json keeps the last one) of
// each of the named top-level fields of the object in b and returns the
// raw bytes of their values (nil: absent). ok is false when b is not a
// well-formed-looking object or a name holds an escape.
func Fields(b []byte, names []string, vals [][]byte) (ok bool) {
	for i := range vals {
		vals[i] = nil
	}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end := bytes.IndexByte(b[i+1:], '"')
		if end < 0 {
			return false
		}
		name := b[i+1 : i+1+end]
		if bytes.IndexByte(name, '\\') >= 0 {
			return false
		}
		i = skipWS(b, i+2+end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		vEnd, good := skipValue(b, i)
		if !good {
			return false
		}
		for j, n := range names {
			if string(name) == n {
				vals[j] = b[i:vEnd]
			}
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return skipWS(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipValue returns the end of the value starting at b[i]: a string, an
// object or array (brackets counted outside strings), or a literal.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
			j++
		}
		return j, j > i
	}
}

// skipString returns the end of the string whose quote is at b[i]: the
// next quote not escaped (preceded by an even run of backslashes).
func skipString(b []byte, i int) (int, bool) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, false
		}
		q := i + j
		n := 0
		for m := q - 1; m >= i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		i = q + 1
	}
}

// ID turns a raw JSON value into an id as idOf does: a non-empty
// string, or a number. ok is false for anything else (null, empty,
// another type, a value that is not valid JSON): the decoder decides. A
// string without escapes shares v's bytes (see SkipFunc: valid while v is).
func ID(v []byte) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch c := v[0]; {
	case c == '"':
		if bytes.IndexByte(v, '\\') < 0 && len(v) > 2 && plainASCII(v[1:len(v)-1]) {
			return unsafe.String(&v[1], len(v)-2), true
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil || s == "" {
			return "", false
		}
		return s, true
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return "", false
		}
		return number.Decimal(n)
	}
	return "", false
}

// plainASCII: printable ASCII, which a JSON string holds as is.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

// IsNull reports whether a raw value is absent or JSON null.
func IsNull(v []byte) bool { return v == nil || string(v) == "null" }
