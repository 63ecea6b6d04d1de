package dataset

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
)

// TestToolRows: rows with tools, OpenAI's shape and the JSON-text column of
// xlam and glaive, read through a real file: the tools as sent, a row's
// tool_choice among its own request fields, a batch row's tool turns sent
// as given; a malformed tool list or turn a bad row naming its field.
func TestToolRows(t *testing.T) {
	t.Parallel()
	weather := `{"function":{"description":"Weather <now>","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"type":"object"}},"type":"function"}`
	good := []struct {
		name, line, tools string
		opts              Options
		want              []chat.Message
		params            map[string]any
	}{
		{
			name:  "messages with tools, stops at the first assistant turn",
			line:  `{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"18C"},{"role":"assistant","content":"18C in Paris."}],"tools":[` + weather + `],"tool_choice":"required"}`,
			tools: `[` + weather + `]`, want: []chat.Message{{Role: "user", Content: "Weather in Paris?"}},
			params: map[string]any{"tool_choice": "required"},
		},
		{
			name:  "xlam's tools column: JSON text of bare functions",
			line:  `{"messages":[{"role":"user","content":"Weather?"}],"tools":"[{\"name\":\"get_weather\",\"description\":\"Weather <now>\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}]"}`,
			tools: `[` + weather + `]`, want: []chat.Message{{Role: "user", Content: "Weather?"}},
		},
		{
			name:  "batch row: tool turns sent as given, body.tools",
			line:  batchLine("r", `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},{"role":"tool","tool_call_id":"c1","content":"18C"}],"tools":[`+weather+`],"tool_choice":"auto"}`),
			tools: `[` + weather + `]`,
			want: []chat.Message{{Role: "user", Content: "Q"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
				{Role: "tool", Content: "18C", ToolCallID: "c1"}},
			params: map[string]any{"tool_choice": "auto"},
		},
		{
			name:  "xlam's row read as a prompt column: query and tools",
			line:  `{"id":0,"query":"Weather?","answers":"[]","tools":"[{\"name\":\"get_weather\",\"description\":\"Weather <now>\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}]"}`,
			opts:  Options{Selection: Selection{Format: "prompt", PromptField: "query"}},
			tools: `[` + weather + `]`, want: []chat.Message{{Role: "user", Content: "Weather?"}},
		},
		{
			name: "no tools: tool_choice alone is not sent",
			line: `{"messages":[{"role":"user","content":"Q"}],"tools":[],"tool_choice":"auto"}`,
			want: []chat.Message{{Role: "user", Content: "Q"}},
		},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "data.jsonl", tt.line+"\n")
			opts := tt.opts
			opts.Path, opts.OnBadRow = path, "fail"
			ps, _ := readAll(t, opts)
			if len(ps) != 1 {
				t.Fatalf("%d prompts, want 1", len(ps))
			}
			p := ps[0]
			if p.Tools != tt.tools || !reflect.DeepEqual(p.Messages, tt.want) || !reflect.DeepEqual(p.Params, tt.params) {
				t.Errorf("tools %s\nmessages %+v\nparams %v\nwant %s\n%+v\n%v", p.Tools, p.Messages, p.Params, tt.tools, tt.want, tt.params)
			}
		})
	}
	bad := []struct{ name, line, msg string }{
		{"tool without a name", `{"messages":[{"role":"user","content":"Q"}],"tools":[{"type":"function","function":{"description":"x"}}]}`, "tools[0].function.name: missing"},
		{"second tool's name not a string", `{"messages":[{"role":"user","content":"Q"}],"tools":[` + weather + `,{"type":"function","function":{"name":3}}]}`, "tools[1].function.name: not a string"},
		{"tools column not JSON", `{"messages":[{"role":"user","content":"Q"}],"tools":"[{"}`, "tools: not JSON: unexpected EOF"},
		{"tools not a list", `{"messages":[{"role":"user","content":"Q"}],"tools":{"name":"f"}}`, "tools: not a list"},
		{"tool of another type", `{"messages":[{"role":"user","content":"Q"}],"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, `tools[0].type: "retrieval", want "function"`},
		{"parameters not an object", `{"messages":[{"role":"user","content":"Q"}],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "tools[0].function.parameters: not an object"},
		{"tool turn's call id a number", `{"messages":[{"role":"user","content":"Q"},{"role":"tool","tool_call_id":7,"content":"r"}]}`, "messages[1].tool_call_id: not a string"},
		{"batch call without a name", batchLine("r", `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]},{"role":"tool","content":"r"}]}`), "body.messages[1].tool_calls[0].function.name: missing"},
		{"batch body.tools malformed", batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"tools":[7]}`), "body.tools[0]: not an object"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "data.jsonl", tt.line+"\n")
			r, err := Open(Options{Selection: Selection{Path: path}, OnBadRow: "fail"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.Next()
			var re *RowError
			if !errors.As(err, &re) || err.Error() != path+":1: "+tt.msg {
				t.Errorf("error %v, want %s:1: %s", err, path, tt.msg)
			}
		})
	}
}

// TestToolRowsWhole: with whole conversations (generation.turns: all) a
// row's tool turns are kept as its cached results, each assistant turn is
// a placeholder holding the row's calls there (so the loop knows where the
// row called), and a malformed tool turn is a bad row naming its field.
func TestToolRowsWhole(t *testing.T) {
	t.Parallel()
	line := `{"messages":[{"role":"user","content":"Q"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"x":1}}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"r1"},{"role":"assistant","content":"A"},{"role":"user","content":"Q2"},{"role":"assistant","content":"B"}],` +
		`"tools":[{"type":"function","function":{"name":"f"}}]}`
	path := writeFile(t, t.TempDir(), "data.jsonl", line+"\n")
	r, err := Open(Options{Selection: Selection{Path: path}, Conversations: true, OnBadRow: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Next()
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	call := chat.ToolCall{ID: "c1", Type: "function", Function: chat.ToolFunction{Name: "f", Arguments: `{"x":1}`}}
	want := []chat.Message{{Role: "user", Content: "Q"}, {Role: "assistant", ToolCalls: []chat.ToolCall{call}}, {Role: "tool", Content: "r1", ToolCallID: "c1"},
		{Role: "assistant"}, {Role: "user", Content: "Q2"}, {Role: "assistant"}}
	if !reflect.DeepEqual(p.Conversation, want) || p.Tools == "" {
		t.Errorf("conversation %+v tools %q\nwant %+v", p.Conversation, p.Tools, want)
	}
	for _, tt := range []struct{ line, msg string }{
		{`{"messages":[{"role":"user","content":"Q"},{"role":"tool","content":"r"},{"role":"assistant","content":"B"}]}`, "messages[1].role: a tool result with no assistant turn before it"},
		{`{"messages":[{"role":"user","content":"Q"},{"role":"assistant","tool_calls":[{"id":"c"}]},{"role":"tool","content":"r"}]}`, "messages[1].tool_calls[0].function: missing"},
		{`{"messages":[{"role":"user","content":"Q"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":7}]}`, "messages[2].content: not a string"},
		{`{"messages":[{"role":"user","content":"Q"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":1,"content":"r"}]}`, "messages[2].tool_call_id: not a string"},
	} {
		path := writeFile(t, t.TempDir(), "data.jsonl", tt.line+"\n")
		r, err := Open(Options{Selection: Selection{Path: path}, Conversations: true, OnBadRow: "fail"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Next()
		r.Close()
		if err == nil || err.Error() != path+":1: "+tt.msg {
			t.Errorf("error %v, want %s:1: %s", err, path, tt.msg)
		}
	}
}

// FuzzWholeToolRow: a row of any bytes read as a whole conversation with
// tools either is a bad row naming file:line or keeps the loop's
// invariants: a user turn before the first placeholder, placeholders
// empty and never two in a row, each tool result after a placeholder or
// another result.
func FuzzWholeToolRow(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"Q"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_call_id":"c","content":"r"},{"role":"assistant","content":"A"}],"tools":[{"name":"f"}]}`)
	f.Add(`{"conversations":[{"from":"human","value":"Q"},{"from":"gpt","value":"A"},{"from":"tool","value":"r"},{"from":"gpt","value":"B"},{"from":"gpt","value":"C"}]}`)
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\r\n") {
			return
		}
		path := writeFile(t, t.TempDir(), "data.jsonl", line+"\n")
		r, err := Open(Options{Selection: Selection{Path: path}, Conversations: true, OnBadRow: "fail"})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		p, err := r.Next()
		var re *RowError
		if err != nil {
			if err != io.EOF && (!errors.As(err, &re) || !strings.HasPrefix(err.Error(), path+":1: ")) {
				t.Fatalf("error %v does not name the row", err)
			}
			return
		}
		prev := ""
		for i, m := range p.Conversation {
			switch {
			case m.Role == "assistant" && (m.Content != "" || prev == "assistant"):
				t.Fatalf("turn %d: placeholder %+v after %s", i, m, prev)
			case m.Role == "assistant" && !slices.ContainsFunc(p.Conversation[:i], func(m chat.Message) bool { return m.Role == "user" }):
				t.Fatalf("turn %d: placeholder before any user turn", i)
			case m.Role == "tool" && prev != "assistant" && prev != "tool":
				t.Fatalf("turn %d: tool result after %q", i, prev)
			}
			prev = m.Role
		}
	})
}
