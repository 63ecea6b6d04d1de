package wire

// Tool calls, both ways: the messages sent carry an assistant turn's
// tool_calls and a tool turn's tool_call_id as the row had them, with the
// row's tools beside them; the answer's calls are read from a plain
// message's tool_calls or assembled from a stream's deltas by index (vLLM:
// a first delta with index, id, type and the function's name, then
// fragments of its arguments), kept exactly as sent.

import (
	"encoding/json"
	"slices"

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

// toolDelta is one entry of a chunk's (or a plain message's) tool_calls:
// its index (the position when the server named none) and what it carries.
type toolDelta struct {
	Index int
	Call  chat.ToolCall
}

// toolDeltas is what a decoded tool_calls list carries; nil for none.
func toolDeltas(in []toolCallJSON) []toolDelta {
	if len(in) == 0 {
		return nil
	}
	out := make([]toolDelta, len(in))
	for i := range in {
		t := &in[i]
		idx := i
		if t.Index != nil {
			idx = *t.Index
		}
		out[i] = toolDelta{Index: idx, Call: chat.ToolCall{ID: t.ID, Type: t.Type,
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

// toolAcc assembles a stream's tool calls: each index's id, type and name
// from the first delta that names them, its arguments' fragments
// concatenated in order; calls in the order their index first came.
type toolAcc struct {
	calls []chat.ToolCall
	args  [][]byte
	at    map[int]int // index -> position in calls
	size  int         // bytes of names and arguments, for the answer's bound
}

func (t *toolAcc) add(ds []toolDelta) {
	for _, d := range ds {
		pos, ok := t.at[d.Index]
		if !ok {
			if t.at == nil {
				t.at = map[int]int{}
			}
			pos = len(t.calls)
			t.at[d.Index] = pos
			t.calls = append(t.calls, chat.ToolCall{})
			t.args = append(t.args, nil)
		}
		c := &t.calls[pos]
		if c.ID == "" {
			c.ID = d.Call.ID
		}
		if c.Type == "" {
			c.Type = d.Call.Type
		}
		if c.Function.Name == "" {
			c.Function.Name = d.Call.Function.Name
		}
		t.args[pos] = append(t.args[pos], d.Call.Function.Arguments...)
		t.size += len(d.Call.Function.Name) + len(d.Call.Function.Arguments)
	}
}

// result is the calls assembled; nil for none.
func (t *toolAcc) result() []chat.ToolCall {
	if len(t.calls) == 0 {
		return nil
	}
	out := make([]chat.ToolCall, len(t.calls))
	for i := range t.calls {
		out[i] = t.calls[i]
		out[i].Function.Arguments = string(t.args[i])
	}
	return out
}

// plainToolCalls is a plain message's calls, as sent.
func plainToolCalls(ds []toolDelta) []chat.ToolCall {
	var t toolAcc
	t.add(ds)
	return t.result()
}

// message writes one turn: role, content (null for an assistant turn of
// tool calls alone, as OpenAI's shape has it), tool_calls, tool_call_id.
func (w *bodyWriter) message(m *chat.Message) {
	w.buf.WriteString(`{"role":`)
	w.value(m.Role)
	w.buf.WriteString(`,"content":`)
	if m.Content == "" && len(m.ToolCalls) > 0 {
		w.buf.WriteString("null")
	} else {
		w.value(m.Content)
	}
	if len(m.ToolCalls) > 0 {
		w.buf.WriteString(`,"tool_calls":`)
		w.value(m.ToolCalls)
	}
	if m.ToolCallID != "" {
		w.buf.WriteString(`,"tool_call_id":`)
		w.value(m.ToolCallID)
	}
	w.buf.WriteByte('}')
}

// messages writes the conversation, [] when empty: by encoding/json in
// one call, as ever, unless a turn calls tools (whose content may be null).
func (w *bodyWriter) messages(msgs []chat.Message) {
	if msgs == nil {
		msgs = []chat.Message{}
	}
	if !slices.ContainsFunc(msgs, func(m chat.Message) bool { return len(m.ToolCalls) > 0 }) {
		w.value(msgs)
		return
	}
	w.buf.WriteByte('[')
	for i := range msgs {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.message(&msgs[i])
	}
	w.buf.WriteByte(']')
}

// ToolChoiceAuto is what generation.tool_choice is when the config says
// none: the model decides whether to call.
const ToolChoiceAuto = "auto"
