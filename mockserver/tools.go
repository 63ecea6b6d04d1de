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

	"github.com/synthgen/synthgen/mockserver/schemagen"
	"github.com/synthgen/synthgen/mockserver/tokenids"
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

// callFrame is what a call's tokens spell around its arguments, as
// Hermes-style models write a call and the server's tool parser reads it:
// `<tool_call>\n{"name": NAME, "arguments": ` and `}\n</tool_call>`.
func callFrame(name string) (head, tail string) {
	q, _ := json.Marshal(name) // a string always marshals
	return "<tool_call>\n{\"name\": " + string(q) + ", \"arguments\": ", "}\n</tool_call>"
}

// ToolCallText is the text the tokens of a call of name with arguments
// spell (their ids are its bytes', see tokenids.Text): after the answer's
// reasoning, a call answer's token_ids are exactly these.
func ToolCallText(name, arguments string) string {
	head, tail := callFrame(name)
	return head + arguments + tail
}

// toolChunk is one delta of a streamed tool answer and the text of its
// tokens.
type toolChunk struct {
	delta map[string]any
	text  string
}

// tools sends a tool answer, streamed or plain. Its tokens are its text's
// bytes (tokenids.Bytes): the reasoning's, then the call's (ToolCallText) or the
// text's; usage counts them, and with return_token_ids (tokenids) the
// answer carries their ids and the prompt's, in vLLM's places. It carries
// no logprobs.
func (g *generation) tools(t *toolAnswer, prompt int, stream, usage bool) bool {
	finish, head, tail := "stop", "", ""
	if t.name != "" {
		finish = "tool_calls"
		head, tail = callFrame(t.name)
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
	var chunks []toolChunk
	if field != FieldNone {
		chunks = append(chunks, toolChunk{reasoning(toolThought), toolThought})
	}
	if t.name == "" {
		chunks = append(chunks, toolChunk{map[string]any{"content": t.text}, t.text})
	} else {
		chunks = append(chunks, toolChunk{map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID, "type": "function",
			"function": map[string]any{"name": t.name, "arguments": ""}}}}, head})
		for _, f := range fragments(t.arguments, 4) {
			chunks = append(chunks, toolChunk{map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": f}}}}, f})
		}
	}
	if !stream {
		msg := reasoning(toolThought)
		msg["role"], msg["content"], msg["tool_calls"] = "assistant", t.text, []any{}
		if t.name != "" {
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": t.name, "arguments": t.arguments}}}
		}
		return g.toolsPlain(msg, chunks, tail, finish, prompt)
	}
	return g.toolsStream(chunks, tail, finish, prompt, usage)
}

// toolsPlain sends a plain tool answer whose message is msg and whose
// tokens spell chunks' texts and tail.
func (g *generation) toolsPlain(msg map[string]any, chunks []toolChunk, tail, finish string, prompt int) bool {
	var text strings.Builder
	for _, c := range chunks {
		text.WriteString(c.text)
	}
	text.WriteString(tail)
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish, "stop_reason": nil}
	if g.toks.IDs() {
		choice["token_ids"] = tokenids.Bytes(text.String())
	}
	g.pending = int64(text.Len())
	g.buf = g.appendEnvelope(g.buf, "chat.completion")
	g.buf = append(g.buf, `"choices":`...)
	g.buf = appendJSON(g.buf, []any{choice})
	g.buf = append(g.buf, `,"usage":`...)
	g.buf = appendUsage(g.buf, prompt, text.Len(), true, g.s.cached(prompt))
	g.buf = append(g.buf, `,"prompt_logprobs":null`...)
	g.buf = g.toks.AppendPromptIDs(g.buf)
	g.buf = append(g.buf, '}')
	g.finish(finish)
	g.w.Header().Set("Content-Type", "application/json")
	_ = g.write()
	return true
}

// toolsStream sends a streamed tool answer, vLLM's deltas: the role, the
// reasoning, the call's index, id, type and name with empty arguments,
// then the arguments in fragments (or the text), then the finish, which
// carries the ids of the call's tail.
func (g *generation) toolsStream(chunks []toolChunk, tail, finish string, prompt int, usage bool) bool {
	g.buf = g.appendChunkHead(g.buf)
	g.buf = append(g.buf, roleDelta...)
	if g.toks != nil {
		g.buf = g.toks.AppendRoleTail(g.buf)
	} else {
		g.buf = append(g.buf, tailNone...)
	}
	completion := len(tail)
	for i, c := range chunks {
		if !g.pause(i, true) {
			return false
		}
		g.buf = g.appendChunkHead(g.buf)
		g.buf = appendJSON(g.buf, c.delta)
		g.buf = g.toks.AppendIDsTail(g.buf, "", tokenids.Bytes(c.text))
		g.pending += int64(len(c.text))
		completion += len(c.text)
	}
	g.buf = g.appendChunkHead(g.buf)
	g.buf = append(g.buf, emptyDelta...)
	g.buf = g.toks.AppendIDsTail(g.buf, finish, tokenids.Bytes(tail))
	g.pending += int64(len(tail))
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
	j, _ := schemagen.Marshal(v) // the mock's own maps always marshal
	return append(b, j...)
}
