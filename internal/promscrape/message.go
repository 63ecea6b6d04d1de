package promscrape

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxMessage caps the runes of a message passed on from an error body.
const maxMessage = 300

// BodyMessage is what an error answer's body says, to pass on to a person:
// the message of a JSON error ({"error":{"message":...}} as llama.cpp and
// vLLM write it, {"error":"..."}, {"message":...}, or FastAPI's
// {"detail":"..."}), else the first line of a plain-text body. An HTML page
// or an empty body says nothing (""). The text is the server's, so it is
// cut to maxMessage runes with control characters dropped: it is printed
// to a terminal.
func BodyMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var msg string
	switch body[0] {
	case '{':
		msg = jsonMessage(body)
	case '<':
		return "" // an HTML error page: markup, not a message
	default:
		line, _, _ := bytes.Cut(body, []byte("\n"))
		msg = string(line)
	}
	return clean(msg)
}

// jsonMessage is the message of a JSON error body; "" when it has none.
func jsonMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if len(v.Error) > 0 {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		if s := jsonString(v.Error); s != "" {
			return s
		}
	}
	if s := jsonString(v.Message); s != "" {
		return s
	}
	return jsonString(v.Detail)
}

// jsonString is raw as a JSON string; "" when it is not one.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// clean drops control characters (and invalid UTF-8) from s, folds its
// spaces and cuts it to maxMessage runes.
func clean(s string) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) && !unicode.IsSpace(r) {
			continue
		}
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		need := 1
		if space {
			need = 2 // the space folded before it, then the rune
		}
		if n+need > maxMessage {
			b.WriteString("...")
			break
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
