package wire

// Tool calls, both ways: the messages sent carry an assistant turn's
// tool_calls and a tool turn's tool_call_id as the row had them, with the
// row's tools beside them; the answer's calls are read from a plain
// message's tool_calls or assembled from a stream's deltas by index (vLLM:
// a first delta with index, id, type and the function's name, then
// fragments of its arguments), kept exactly as sent.

import (
	"slices"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/wire/codec"
)

// toolAcc assembles a stream's tool calls: each index's id, type and name
// from the first delta that names them, its arguments' fragments
// concatenated in order; calls in the order their index first came.
type toolAcc struct {
	calls []chat.ToolCall
	args  [][]byte
	at    map[int]int // index -> position in calls
	size  int         // bytes of names and arguments, for the answer's bound
}

func (t *toolAcc) add(ds []codec.ToolDelta) {
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
func plainToolCalls(ds []codec.ToolDelta) []chat.ToolCall {
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
