package codec

// The tool calls of an answer as the reference decoder reads them: a
// message's tool_calls, or a stream delta's fragments of them.

import (
	"encoding/json"

	"github.com/synthgen/synthgen/chat"
)

// toolCallJSON is one entry of a message's or a delta's tool_calls.
// Arguments are raw: a string is its text, anything else (a server that
// sends an object) is kept as the JSON it sent.
type toolCallJSON struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ToolDelta is one entry of a chunk's (or a plain message's) tool_calls:
// its index (the position when the server named none) and what it carries.
type ToolDelta struct {
	Index int
	Call  chat.ToolCall
}

// toolDeltas is what a decoded tool_calls list carries; nil for none.
func toolDeltas(in []toolCallJSON) []ToolDelta {
	if len(in) == 0 {
		return nil
	}
	out := make([]ToolDelta, len(in))
	for i := range in {
		t := &in[i]
		idx := i
		if t.Index != nil {
			idx = *t.Index
		}
		out[i] = ToolDelta{Index: idx, Call: chat.ToolCall{ID: t.ID, Type: t.Type,
			Function: chat.ToolFunction{Name: t.Function.Name, Arguments: argumentsText(t.Function.Arguments)}}}
	}
	return out
}

// argumentsText is a raw JSON value's text: a string's contents, null nothing,
// any other value its JSON as sent.
func argumentsText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}
