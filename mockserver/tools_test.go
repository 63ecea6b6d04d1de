package mockserver

import (
	"fmt"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// toolBody offers a tool whose call's arguments are {"city":
// "city-value", "days": 1}; after, when set, is the tool's result the
// request ends with.
func toolBody(after string) map[string]any {
	msgs := []map[string]any{{"role": "user", "content": "weather in Paris?"}}
	if after != "" {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c0", "type": "function",
				"function": map[string]any{"name": "get_weather", "arguments": `{"city": "Paris"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "c0", "content": after})
	}
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}}}
	return map[string]any{"messages": msgs, "tools": []any{tool}, "return_token_ids": true, "max_tokens": 200}
}

// TestToolAnswerTokenIDs: asked for ids, a tool answer, a call or the text
// after a tool's result, streamed and plain, carries the prompt's ids (one
// a word of the messages, as many as usage.prompt_tokens) and its own, as
// many as usage.completion_tokens, the bytes of its reasoning and then of
// its call as the model writes it (ToolCallText) or its text; the same
// either way. A server that ignores return_token_ids sends none and counts
// the same tokens.
func TestToolAnswerTokenIDs(t *testing.T) {
	const result = "sunny, 21 °C — café ☕"
	for _, field := range []string{FieldReasoning, FieldNone} {
		thought := toolThought
		if field == FieldNone {
			thought = ""
		}
		for _, c := range []struct {
			after, want string
		}{
			{"", thought + ToolCallText("get_weather", `{"city": "city-value", "days": 1}`)},
			{result, thought + "The tool said: " + result},
		} {
			t.Run(fmt.Sprintf("%s/after=%q", field, c.after), func(t *testing.T) {
				_, ts := start(t, Options{Seed: 3, ReasoningField: field})
				_, ignoring := start(t, Options{Seed: 3, ReasoningField: field, IgnoreTokenIDs: true})
				body := toolBody(c.after)
				wantPrompt := tokenids.Prompt("weather in Paris?")
				if c.after != "" {
					wantPrompt = tokenids.Prompt("weather in Paris?", "", c.after)
				}
				var got [][]int32
				for _, streamed := range []bool{true, false} {
					a := askTokens(t, ts.URL, body, streamed)
					what := fmt.Sprintf("streamed=%v", streamed)
					if !slices.Equal(a.prompt, wantPrompt) || len(a.prompt) != a.promptN {
						t.Errorf("%s: prompt ids %v (usage %d), want %v", what, a.prompt, a.promptN, wantPrompt)
					}
					if spelled := spell(t, what, a.ids); spelled != c.want || len(a.ids) != a.completion {
						t.Errorf("%s: %d ids spelling %q, usage.completion_tokens %d; want %q", what, len(a.ids), spelled, a.completion, c.want)
					}
					if wantText := map[bool]string{true: thought, false: c.want}[c.after == ""]; a.text != wantText {
						t.Errorf("%s: reasoning and content %q, want %q", what, a.text, wantText)
					}
					got = append(got, a.ids)
					if n := askTokens(t, ignoring.URL, body, streamed); n.sawIDs || n.completion != a.completion {
						t.Errorf("%s: a server ignoring return_token_ids: ids %v, completion_tokens %d, want none and %d", what, n.ids, n.completion, a.completion)
					}
				}
				if !slices.Equal(got[0], got[1]) {
					t.Errorf("streamed ids %v, plain %v: want one answer", got[0], got[1])
				}
			})
		}
	}
}
