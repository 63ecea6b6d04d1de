package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset/shape"
)

// The function-calling datasets' ShareGPT shapes, each read through a real
// file into OpenAI-shape turns and tools: under turns: first (the prompt
// up to the first assistant turn; a function_call is one) and as the
// whole-conversation reader (turns: all) sees them.
func TestShareGPTToolShapes(t *testing.T) {
	t.Parallel()
	const recipeTool = `{"function":{"description":"Recipes by ingredient","name":"search_recipes","parameters":{"properties":{"ingredients":{"items":{"type":"string"},"type":"array"}},"type":"object"}},"type":"function"}`
	call := func(id, name, args string) chat.ToolCall {
		return chat.ToolCall{ID: id, Type: "function", Function: chat.ToolFunction{Name: name, Arguments: args}}
	}
	cases := []struct {
		name, line, tools string
		sel               Selection
		first, whole      []chat.Message
	}{
		{
			// LLaMA-Factory's sharegpt tool format (its glaive_toolcall data):
			// function_call's value is JSON text, tools a JSON-text column.
			name: "llama-factory function_call and observation",
			line: `{"conversations":[{"from":"human","value":"Chicken and rice: a recipe?"},` +
				`{"from":"function_call","value":"{\"name\": \"search_recipes\", \"arguments\": {\"ingredients\": [\"chicken\", \"rice\"]}}"},` +
				`{"from":"observation","value":"{\"recipes\": [\"pilaf\"]}"},{"from":"gpt","value":"Try a pilaf."},` +
				`{"from":"human","value":"Thanks!"},{"from":"gpt","value":"Enjoy."}],` +
				`"tools":"[{\"name\": \"search_recipes\", \"description\": \"Recipes by ingredient\", \"parameters\": {\"type\": \"object\", \"properties\": {\"ingredients\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}}]"}`,
			tools: "[" + recipeTool + "]",
			first: []chat.Message{{Role: "user", Content: "Chicken and rice: a recipe?"}},
			whole: []chat.Message{{Role: "user", Content: "Chicken and rice: a recipe?"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{call("call_1", "search_recipes", `{"ingredients": ["chicken", "rice"]}`)}},
				{Role: "tool", Content: `{"recipes": ["pilaf"]}`, ToolCallID: "call_1"},
				{Role: "assistant"}, {Role: "user", Content: "Thanks!"}, {Role: "assistant"}},
		},
		{
			name: "parallel calls: a list, each observation answering the next call; arguments as a JSON string",
			line: `{"conversations":[{"from":"system","value":"S"},{"from":"human","value":"Q"},` +
				`{"from":"function_call","value":"[{\"name\":\"a\",\"arguments\":{\"x\":1}},{\"name\":\"b\",\"arguments\":\"{\\\"y\\\": 2}\"}]"},` +
				`{"from":"observation","value":"ra"},{"from":"observation","value":"rb"},{"from":"gpt","value":"done"}]}`,
			first: []chat.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"}},
			whole: []chat.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{call("call_2_0", "a", `{"x":1}`), call("call_2_1", "b", `{"y": 2}`)}},
				{Role: "tool", Content: "ra", ToolCallID: "call_2_0"}, {Role: "tool", Content: "rb", ToolCallID: "call_2_1"},
				{Role: "assistant"}},
		},
		{
			name: "role/content keys, a second call after the first's result",
			line: `{"conversations":[{"role":"user","content":"Q"},{"role":"function_call","content":"{\"name\":\"f\",\"arguments\":{}}"},` +
				`{"role":"observation","content":"r1"},{"role":"function_call","content":"{\"name\":\"f\",\"arguments\":{\"n\":2}}"},` +
				`{"role":"observation","content":"r2"},{"role":"assistant","content":"A"}]}`,
			first: []chat.Message{{Role: "user", Content: "Q"}},
			whole: []chat.Message{{Role: "user", Content: "Q"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{call("call_1", "f", `{}`)}}, {Role: "tool", Content: "r1", ToolCallID: "call_1"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{call("call_3", "f", `{"n":2}`)}}, {Role: "tool", Content: "r2", ToolCallID: "call_3"},
				{Role: "assistant"}},
		},
		{
			name: "results tagged tool after a function_call answer it; one naming its own call is kept",
			line: `{"conversations":[{"from":"human","value":"Q"},{"from":"function_call","value":"[{\"name\":\"f\",\"arguments\":{}},{\"name\":\"g\",\"arguments\":{}}]"},` +
				`{"from":"tool","value":"r1"},{"from":"tool","value":"r2","tool_call_id":"mine"},{"from":"tool","value":"r3"},{"from":"gpt","value":"A"}]}`,
			first: []chat.Message{{Role: "user", Content: "Q"}},
			whole: []chat.Message{{Role: "user", Content: "Q"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{call("call_1_0", "f", `{}`), call("call_1_1", "g", `{}`)}},
				{Role: "tool", Content: "r1", ToolCallID: "call_1_0"}, {Role: "tool", Content: "r2", ToolCallID: "mine"},
				{Role: "tool", Content: "r3", ToolCallID: "call_1_1"}, {Role: "assistant"}},
		},
		{
			// NousResearch/hermes-function-calling-v1: plain turns. The calls
			// are text in gpt turns (often Python dicts, not JSON) and the
			// tools text in the system prompt: both are sent as the row has
			// them; tool turns are results.
			name: "hermes: plain turns, the tool turn a result",
			line: `{"id":"h1","conversations":[{"from":"system","value":"You are a function calling AI model. <tools> [{'name': 'get_stock'}] </tools>"},` +
				`{"from":"human","value":"TSLA?"},{"from":"gpt","value":"<tool_call>\n{'arguments': {'symbol': 'TSLA'}, 'name': 'get_stock'}\n</tool_call>"},` +
				`{"from":"tool","value":"<tool_response>\n{\"name\": \"get_stock\", \"content\": 250}\n</tool_response>"},{"from":"gpt","value":"250."}],"category":"Finance"}`,
			first: []chat.Message{{Role: "system", Content: "You are a function calling AI model. <tools> [{'name': 'get_stock'}] </tools>"}, {Role: "user", Content: "TSLA?"}},
			whole: []chat.Message{{Role: "system", Content: "You are a function calling AI model. <tools> [{'name': 'get_stock'}] </tools>"}, {Role: "user", Content: "TSLA?"},
				{Role: "assistant"}, {Role: "tool", Content: "<tool_response>\n{\"name\": \"get_stock\", \"content\": 250}\n</tool_response>"}, {Role: "assistant"}},
		},
		{
			// Team-ACE/ToolACE: from user/assistant/tool; its tools are text
			// in a system column, which is not a turn.
			name: "toolace: plain turns",
			line: `{"system":"Here is a list of functions in JSON format: [{\"name\": \"f\"}]","conversations":[{"from":"user","value":"Q"},` +
				`{"from":"assistant","value":"[f(x=1)]"},{"from":"tool","value":"[{\"name\": \"f\", \"results\": 1}]"},{"from":"assistant","value":"1"}]}`,
			first: []chat.Message{{Role: "user", Content: "Q"}},
			whole: []chat.Message{{Role: "user", Content: "Q"}, {Role: "assistant"}, {Role: "tool", Content: `[{"name": "f", "results": 1}]`}, {Role: "assistant"}},
		},
		{
			// Salesforce/xlam-function-calling-60k: a prompt row, its
			// answers (the row's calls) not read; one turn, no conversation.
			name: "xlam: query and tools",
			line: `{"id":0,"query":"Weather?","answers":"[{\"name\": \"w\", \"arguments\": {}}]","tools":"[{\"name\": \"w\"}]"}`,
			sel:  Selection{Format: "prompt", PromptField: "query"}, tools: `[{"function":{"name":"w"},"type":"function"}]`,
			first: []chat.Message{{Role: "user", Content: "Weather?"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sel := c.sel
			sel.Path = writeFile(t, t.TempDir(), "data.jsonl", c.line+"\n")
			for whole, want := range map[bool][]chat.Message{false: c.first, true: c.whole} {
				ps, bad := readAll(t, Options{Selection: sel, Conversations: whole, OnBadRow: "skip"})
				if len(ps) != 1 || len(bad) != 0 {
					t.Fatalf("whole %v: %d prompts, bad rows %v", whole, len(ps), bad)
				}
				got := ps[0].Messages
				if whole {
					got = ps[0].Conversation
				}
				if !reflect.DeepEqual(got, want) || ps[0].Tools != c.tools {
					t.Errorf("whole %v:\n got %+v tools %s\nwant %+v tools %s", whole, got, ps[0].Tools, want, c.tools)
				}
			}
		})
	}
}

// A malformed function_call, an observation answering no call, and a tools
// column that is not a list of tools: each a bad row naming file, line and
// field, under either turns mode (the calls are checked wherever they
// stand, so a row is bad or good whatever generation.turns is).
func TestShareGPTToolShapesBad(t *testing.T) {
	t.Parallel()
	conv := func(turns string) string { return `{"conversations":[{"from":"human","value":"Q"},` + turns + `]}` }
	fc := func(value string) string { return `{"from":"function_call","value":` + quote(value) + `}` }
	type badRow struct{ name, line, msg string }
	check := func(t *testing.T, tt badRow, modes ...bool) {
		path := writeFile(t, t.TempDir(), "data.jsonl", tt.line+"\n")
		for _, whole := range modes {
			r, err := Open(Options{Selection: Selection{Path: path}, Conversations: whole, OnBadRow: "fail"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Next()
			r.Close()
			var re *RowError
			if !errors.As(err, &re) || err.Error() != path+":1: "+tt.msg {
				t.Errorf("%s (whole %v): error %v\nwant %s:1: %s", tt.name, whole, err, path, tt.msg)
			}
		}
	}
	// A result's content is read where the turn is sent: turns: all.
	check(t, badRow{"observation without a value", conv(fc(`{"name":"f","arguments":{}}`) + `,{"from":"observation"}`), "conversations[2].value: missing"}, true)
	for _, tt := range []badRow{
		{"value not JSON", conv(fc(`{"name": "f", "arguments": `)), "conversations[1].value: not JSON: unexpected end of JSON input"},
		{"value JSON with text after it", conv(fc(`{"name":"f","arguments":{}} and more`)), "conversations[1].value: not JSON: invalid character 'a' after top-level value"},
		{"value a string", conv(fc(`"f(x=1)"`)), `conversations[1].value: not a call: want {"name", "arguments"} or a list of them`},
		{"value not a string", conv(`{"from":"function_call","value":{"name":"f"}}`), "conversations[1].value: not a string"},
		{"no name", conv(fc(`{"arguments":{}}`)), "conversations[1].value.name: missing"},
		{"empty name", conv(fc(`{"name":"","arguments":{}}`)), "conversations[1].value.name: empty"},
		{"name a number", conv(fc(`{"name":3,"arguments":{}}`)), "conversations[1].value.name: not a string"},
		{"no arguments", conv(fc(`{"name":"f"}`)), "conversations[1].value.arguments: missing"},
		{"arguments a list", conv(fc(`{"name":"f","arguments":[1]}`)), "conversations[1].value.arguments: not a string or object"},
		{"empty list of calls", conv(fc(`[]`)), "conversations[1].value: empty"},
		{"second call of a list without a name", conv(fc(`[{"name":"f","arguments":{}},{"arguments":{}}]`)), "conversations[1].value[1].name: missing"},
		{"a list item not an object", conv(fc(`[7]`)), "conversations[1].value[0]: not an object"},
		{"observation first", conv(`{"from":"observation","value":"r"}`), "conversations[1].from: " + shape.ErrNoCall.Error()},
		{"observation after an answer", conv(`{"from":"gpt","value":"A"},{"from":"observation","value":"r"}`), "conversations[2].from: " + shape.ErrNoCall.Error()},
		{"more observations than calls", conv(fc(`{"name":"f","arguments":{}}`) + `,{"from":"observation","value":"r"},{"from":"observation","value":"r2"}`),
			"conversations[3].from: " + shape.ErrNoCall.Error() + ": the function_call before it made 1 calls, each answered already"},
		{"tools a JSON object", `{"conversations":[{"from":"human","value":"Q"}],"tools":"{\"name\": \"f\"}"}`, "tools: not a list"},
		{"tools a list of names", `{"conversations":[{"from":"human","value":"Q"}],"tools":"[\"f\"]"}`, "tools[0]: not an object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, tt, false, true)
		})
	}
}

// The LLaMA-Factory shape in Parquet, as the Hub serves such datasets: a
// list of {from, value} structs and the tools as a string column, read into
// the same calls and results as JSONL.
func TestShareGPTToolShapesParquet(t *testing.T) {
	t.Parallel()
	type row struct {
		Conversations []pqTurn `parquet:"conversations,list"`
		Tools         string   `parquet:"tools"`
	}
	path := filepath.Join(t.TempDir(), "glaive.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f)
	if _, err := w.Write([]row{{
		Conversations: []pqTurn{{"human", "Q"}, {"function_call", `{"name": "f", "arguments": {"x": 1}}`}, {"observation", "r"}, {"gpt", "A"}},
		Tools:         `[{"name": "f", "parameters": {"type": "object"}}]`,
	}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ps, bad := readAll(t, Options{Selection: Selection{Path: path}, Conversations: true})
	if len(ps) != 1 || len(bad) != 0 {
		t.Fatalf("%d prompts, bad rows %v", len(ps), bad)
	}
	want := []chat.Message{{Role: "user", Content: "Q"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.ToolFunction{Name: "f", Arguments: `{"x": 1}`}}}},
		{Role: "tool", Content: "r", ToolCallID: "call_1"}, {Role: "assistant"}}
	if tools := `[{"function":{"name":"f","parameters":{"type":"object"}},"type":"function"}]`; !reflect.DeepEqual(ps[0].Conversation, want) || ps[0].Tools != tools {
		t.Errorf("conversation %+v tools %s\nwant %+v tools %s", ps[0].Conversation, ps[0].Tools, want, tools)
	}
}
