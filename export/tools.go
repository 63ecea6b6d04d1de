package export

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/chat"
)

// messageTurn is a turn of the messages format: OpenAI's, an assistant
// turn's tool_calls ({id, type, function: {name, arguments}}, arguments
// the JSON text as the model sent it) and a tool turn's tool_call_id
// beside role and content, as Hugging Face chat templates read them.
// SpecForge's conversations and speculators' review twin are the same
// turns: SpecForge's loader (specforge/data/parse.py) hands role, content,
// tool_calls (arguments parsed from their text), tool_call_id and
// reasoning_content to the model's chat template, and the row's tools
// (JSON text, parsed) beside them.
type messageTurn struct {
	Role             string          `json:"role" parquet:"role"`
	Content          string          `json:"content" parquet:"content"`
	ReasoningContent string          `json:"reasoning_content,omitempty" parquet:"reasoning_content,optional"`
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
	ToolCallID       string          `json:"tool_call_id,omitempty" parquet:"tool_call_id,optional"`
}

// LLaMA-Factory's ShareGPT function calling (data/README.md, "Sharegpt
// Format", and src/llamafactory/data/converter.py): an assistant turn
// that calls is from "function_call", its value the JSON {"name",
// "arguments"} with the arguments as a JSON object (a list of them for
// several calls, which its FunctionFormatter takes as parallel calls); a
// tool result is from "observation", consecutive results one turn joined
// as its OpenAI reader joins them; the tools are a "tools" column of JSON
// text. Its reader skips a row whose turns, after a leading system turn,
// are not human or observation at even places and gpt or function_call at
// odd ones, ending with the latter.
const (
	sharegptCall        = "function_call"
	sharegptObservation = "observation"
	toolResponsesJoin   = "\n</tool_response>\n<tool_response>\n"
)

// sharegptCallValue is one call as a function_call turn holds it.
type sharegptCallValue struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// sharegptTurns are conv as ShareGPT turns, the reasoning placed as mode
// says (inline, before a call's JSON: LLaMA-Factory's thought words).
func sharegptTurns(conv []Turn, mode string) []fromTurn {
	out := make([]fromTurn, 0, len(conv))
	for i, t := range conv {
		if t.Role == "tool" {
			if i > 0 && conv[i-1].Role == "tool" {
				out[len(out)-1].Value += toolResponsesJoin + t.Content
				continue
			}
			out = append(out, fromTurn{From: sharegptObservation, Value: t.Content})
			continue
		}
		from, ok := sharegptFrom[t.Role]
		if !ok {
			from = t.Role
		}
		if len(t.ToolCalls) > 0 {
			from, t.Content = sharegptCall, callsValue(t.ToolCalls)
		}
		content, reasoning := placeReasoning(t, mode)
		out = append(out, fromTurn{From: from, Value: content, ReasoningContent: reasoning})
	}
	return out
}

// callsValue is calls as a function_call turn's value. Arguments that are
// not JSON (refused by sharegptRefusal) are written as a JSON string.
func callsValue(calls []chat.ToolCall) string {
	vs := make([]sharegptCallValue, len(calls))
	for i, c := range calls {
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(c.Function.Arguments)
		}
		vs[i] = sharegptCallValue{Name: c.Function.Name, Arguments: args}
	}
	var b []byte
	if len(vs) == 1 {
		b, _ = json.Marshal(vs[0])
	} else {
		b, _ = json.Marshal(vs)
	}
	return string(b)
}

// badArguments names the first call whose arguments are not a JSON
// object, or "". LLaMA-Factory refuses such a function_call turn;
// SpecForge's loader silently replaces them with {}: a row that would
// train on a call the model did not make. (A chat template walks the
// arguments as an object.)
func badArguments(calls []chat.ToolCall) string {
	for _, c := range calls {
		var args map[string]json.RawMessage
		if json.Unmarshal([]byte(c.Function.Arguments), &args) != nil || args == nil {
			return fmt.Sprintf("call %q of %s: arguments are not a JSON object", c.ID, c.Function.Name)
		}
	}
	return ""
}

// sharegptRefusal is why LLaMA-Factory's ShareGPT reader would skip or
// misrender conv, or "": turns out of its order, a call's arguments that
// are not a JSON object, text beside a call (a function_call turn holds
// the call alone), or, with mode inline, reasoning before a call that holds
// the words its FunctionFormatter looks for (</think>, <tool_call>).
func sharegptRefusal(conv []Turn, mode string) string {
	if len(conv) > 0 && conv[0].Role == "system" {
		conv = conv[1:]
	}
	n := 0
	for i, t := range conv {
		if t.Role == "tool" && i > 0 && conv[i-1].Role == "tool" {
			continue // one observation with the one before
		}
		odd := t.Role == "assistant"
		if odd != (n%2 == 1) || !odd && t.Role != "user" && t.Role != "tool" {
			return fmt.Sprintf("turn %d (%s) out of order: human or observation, then gpt or function_call", i, t.Role)
		}
		n++
		if len(t.ToolCalls) == 0 {
			continue
		}
		if why := badArguments(t.ToolCalls); why != "" {
			return fmt.Sprintf("turn %d: %s", i, why)
		}
		if !pyBlank(t.Content) {
			return fmt.Sprintf("turn %d: text beside a call", i)
		}
		if mode == ReasoningInline && (strings.Contains(t.Reasoning, "</think>") || strings.Contains(t.Reasoning, "<tool_call>")) {
			return fmt.Sprintf("turn %d: </think> or <tool_call> in the reasoning before a call", i)
		}
	}
	if n == 0 || n%2 == 1 {
		return "the conversation does not end with gpt or function_call"
	}
	return ""
}

// hasTools says whether a SpecForge row holds tool turns or calls.
func hasTools(row specforgeRow) bool {
	for _, t := range row.Conversations {
		if t.Role == "tool" || len(t.ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// specforgeToolRefusal is why SpecForge's loader would cut or misread a
// row with tools, or "". validate_regenerated_data.py takes no tool turn
// (and no empty content, which a call may have), so such a row is held to
// the rules of specforge/data/parse.py instead: a system turn first or
// not at all, a user turn next, a tool turn only after an assistant or
// tool turn, an assistant turn only after a user or tool turn; and here
// also: a tool turn for each call at most (none after an answer without
// calls), arguments that are JSON (the loader would put {} in their
// place), an assistant turn with content or a call, and an assistant turn
// last.
func specforgeToolRefusal(row specforgeRow) string {
	conv := row.Conversations
	if len(conv) > 0 && conv[0].Role == "system" {
		conv = conv[1:]
	}
	open := 0 // calls of the last assistant turn not answered yet
	for j, t := range conv {
		switch t.Role {
		case "assistant":
			open = len(t.ToolCalls)
		case "tool":
			if open == 0 {
				return fmt.Sprintf("message %d: a tool turn that answers no call", j)
			}
			open--
		}
		prev := "user"
		if j > 0 {
			prev = conv[j-1].Role
		}
		switch {
		case j == 0 && t.Role != "user":
			return fmt.Sprintf("message %d: the conversation must start with a user turn, not %q", j, t.Role)
		case t.Role == "tool" && prev != "assistant" && prev != "tool",
			t.Role == "assistant" && prev != "user" && prev != "tool",
			t.Role != "user" && t.Role != "assistant" && t.Role != "tool":
			return fmt.Sprintf("message %d: %q after %q", j, t.Role, prev)
		case t.Role == "assistant" && len(t.ToolCalls) == 0 && pyBlank(t.Content):
			return fmt.Sprintf("message %d content must be a non-empty string", j)
		}
		if why := badArguments(t.ToolCalls); why != "" {
			return fmt.Sprintf("message %d: %s", j, why)
		}
	}
	if len(conv) == 0 || conv[len(conv)-1].Role != "assistant" {
		return "conversation must end with an assistant message"
	}
	return ""
}
