package mockserver

// Tool answers, as vLLM with a tool parser gives them: a request that
// offers tools (and whose tool_choice is not "none") is answered with a
// call of the first tool offered, its arguments made from the tool's
// parameters' schema; a request whose last turn is a tool result is
// answered from that result ("The tool said: <its first 40 characters>"),
// so a test sees the result was sent. A tool whose name starts with
// "broken" gets arguments that are not valid JSON, as a model's can be.
// These answers take no faults and no batch model: they are few in a run.

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// toolFields are the request's and messages' tool fields the mock reads.
type toolFields struct {
	Tools      []mockTool      `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

type mockTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string `json:"name"`
		Parameters struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		} `json:"parameters"`
	} `json:"function"`
}

// toolAnswer is what a tool-aware answer says: a call, or text from a
// tool's result.
type toolAnswer struct {
	name, arguments string // the call; "" when text
	text            string
}

// toolReply is the tool answer r asks for, or nil for an ordinary answer.
func (r *chatRequest) toolReply() *toolAnswer {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
		return &toolAnswer{text: "The tool said: " + firstRunes(string(r.Messages[n-1].Content), 40)}
	}
	if len(r.Tools) == 0 || string(r.ToolChoice) == `"none"` {
		return nil
	}
	t := &r.Tools[0]
	return &toolAnswer{name: t.Function.Name, arguments: argumentsFor(t)}
}

// argumentsFor makes a call's arguments from the tool's parameters: each
// property, in sorted order, a value of its type; {} when there are none.
func argumentsFor(t *mockTool) string {
	if strings.HasPrefix(t.Function.Name, "broken") {
		return `{"city": "Par`
	}
	props := t.Function.Parameters.Properties
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kq, _ := json.Marshal(k)
		b.Write(kq)
		b.WriteString(": ")
		switch props[k].Type {
		case "integer", "number":
			b.WriteString("1")
		case "boolean":
			b.WriteString("true")
		case "array":
			b.WriteString("[]")
		case "object":
			b.WriteString("{}")
		default:
			b.WriteString(`"` + k + `-value"`)
		}
	}
	b.WriteByte('}')
	return b.String()
}

func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// fragments splits s into pieces of about n bytes, never inside a rune: a
// stream's argument deltas.
func fragments(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// toolThought is the reasoning a tool answer carries beside its call.
const toolThought = "A tool answers this."

// tools sends a tool answer, streamed (vLLM's deltas: the role, the
// reasoning, the call's index, id, type and name with empty arguments,
// then the arguments in fragments, then the finish) or plain.
func (g *generation) tools(t *toolAnswer, prompt int, stream, usage bool) bool {
	finish := "stop"
	if t.name != "" {
		finish = "tool_calls"
	}
	callID := string(appendHex([]byte("chatcmpl-tool-"), g.id))
	field := g.s.opts.ReasoningField
	reasoning := func(text string) map[string]any {
		switch field {
		case FieldNone:
			return map[string]any{}
		case FieldBoth:
			return map[string]any{FieldReasoning: text, FieldReasoningContent: text}
		}
		return map[string]any{field: text}
	}
	if !stream {
		msg := reasoning(toolThought)
		msg["role"] = "assistant"
		if t.name != "" {
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": t.name, "arguments": t.arguments}}}
		} else {
			msg["content"] = t.text
			msg["tool_calls"] = []any{}
		}
		g.pending = 2
		g.buf = g.appendEnvelope(g.buf, "chat.completion")
		g.buf = append(g.buf, `"choices":`...)
		g.buf = appendJSON(g.buf, []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish, "stop_reason": nil}})
		g.buf = append(g.buf, `,"usage":`...)
		g.buf = appendUsage(g.buf, prompt, int(g.pending), true, g.s.cached(prompt))
		g.buf = append(g.buf, '}')
		g.finish(finish)
		g.w.Header().Set("Content-Type", "application/json")
		_ = g.write()
		return true
	}
	deltas := []any{map[string]any{"role": "assistant", "content": ""}}
	if field != FieldNone {
		deltas = append(deltas, reasoning(toolThought))
	}
	if t.name == "" {
		deltas = append(deltas, map[string]any{"content": t.text})
	} else {
		deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID, "type": "function",
			"function": map[string]any{"name": t.name, "arguments": ""}}}})
		for _, f := range fragments(t.arguments, 4) {
			deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": f}}}})
		}
	}
	for i, d := range deltas {
		if i > 0 && !g.pause(i-1, true) {
			return false
		}
		g.buf = g.appendChunkHead(g.buf)
		g.buf = appendJSON(g.buf, d)
		g.buf = append(g.buf, tailNone...)
		if i > 0 {
			g.pending++
		}
	}
	completion := int(g.pending)
	g.buf = g.appendChunkHead(g.buf)
	g.buf = append(g.buf, `{"content":""},"logprobs":null,"finish_reason":"`...)
	g.buf = append(g.buf, finish...)
	g.buf = append(g.buf, `","stop_reason":null}]}`+"\n\n"...)
	if usage {
		g.buf = append(g.buf, "data: "...)
		g.buf = g.appendEnvelope(g.buf, "chat.completion.chunk")
		g.buf = append(g.buf, `"choices":[],"usage":`...)
		g.buf = appendUsage(g.buf, prompt, completion, false, g.s.cached(prompt))
		g.buf = append(g.buf, "}\n\n"...)
	}
	g.buf = append(g.buf, doneFrame...)
	g.finish(finish)
	_ = g.flush()
	return true
}

// appendJSON appends v's JSON, HTML left unescaped as vLLM leaves it.
func appendJSON(b []byte, v any) []byte {
	var sb strings.Builder
	e := json.NewEncoder(&sb)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return append(b, strings.TrimSuffix(sb.String(), "\n")...)
}
