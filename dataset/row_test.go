package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
)

func u(s string) chat.Message  { return chat.Message{Role: "user", Content: s} }
func sy(s string) chat.Message { return chat.Message{Role: "system", Content: s} }
func as(s string) chat.Message { return chat.Message{Role: "assistant", Content: s} }

// batchLine is a line of an OpenAI batch input file asking a chat completion
// of body.
func batchLine(id, body string) string {
	return `{"custom_id":` + quote(id) + `,"method":"POST","url":"/v1/chat/completions","body":` + body + `}`
}

// TestRowShapes reads one JSONL row per case through a real file and checks
// the conversation, id and source a user would get, or the field named bad.
func TestRowShapes(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		line   string
		want   []chat.Message
		id     string
		source string
		params map[string]any // a request row's own fields
		model  string
		field  string // when the row is bad
		err    error  // matched with errors.Is when set
		msg    string // the error text after "file:1: " when set
	}{
		{
			name: "sharegpt single turn", line: sharegptLine("MetaMath", "human", "What is 2+2?", "gpt", "4"),
			want: []chat.Message{u("What is 2+2?")}, id: "0", source: "MetaMath",
		},
		{
			name: "sharegpt system first, stops at first assistant",
			line: sharegptLine("slimorca", "system", "Be brief.", "human", "Hi", "gpt", "Hello", "human", "More?", "gpt", "No"),
			want: []chat.Message{sy("Be brief."), u("Hi")}, id: "0", source: "slimorca",
		},
		{
			name: "sharegpt role aliases user/assistant/model",
			line: sharegptLine("x", "user", "q1", "model", "a1"),
			want: []chat.Message{u("q1")}, id: "0", source: "x",
		},
		{
			name: "sharegpt empty system turn dropped",
			line: sharegptLine("x", "system", "", "human", "q", "gpt", "a"),
			want: []chat.Message{u("q")}, id: "0", source: "x",
		},
		{
			name: "sharegpt consecutive user turns kept, no assistant at all",
			line: sharegptLine("", "human", "part 1", "human", "part 2"),
			want: []chat.Message{u("part 1"), u("part 2")}, id: "0",
		},
		{
			name: "sharegpt unicode",
			line: sharegptLine("ultrafeedback", "human", "请解释 🐙 café", "gpt", "好"),
			want: []chat.Message{u("请解释 🐙 café")}, id: "0", source: "ultrafeedback",
		},
		{
			name: "messages with string content",
			line: `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"},{"role":"assistant","content":"A"}]}`,
			want: []chat.Message{sy("S"), u("Q")}, id: "0",
		},
		{
			name: "messages with text parts joined by newline",
			line: `{"messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]}`,
			want: []chat.Message{u("one\ntwo")}, id: "0",
		},
		{
			name: "messages developer role is a system turn",
			line: `{"messages":[{"role":"developer","content":"D"},{"role":"user","content":"Q"}]}`,
			want: []chat.Message{sy("D"), u("Q")}, id: "0",
		},
		{
			name: "conversations holding role/content turns",
			line: `{"conversations":[{"role":"user","content":"Q"},{"role":"assistant","content":"A"}]}`,
			want: []chat.Message{u("Q")}, id: "0",
		},
		{
			name: "plain prompt column, auto",
			line: `{"prompt":"Tell me a joke","source":"jokes"}`,
			want: []chat.Message{u("Tell me a joke")}, id: "0", source: "jokes",
		},
		{
			name: "prompt column named by PromptField", opts: Options{Selection: Selection{Format: "prompt", PromptField: "question"}},
			line: `{"question":"Why is the sky blue?","prompt":"ignored"}`,
			want: []chat.Message{u("Why is the sky blue?")}, id: "0",
		},
		{
			name: "alpaca with input",
			line: `{"instruction":"Translate to French.","input":"Good morning","output":"Bonjour"}`,
			want: []chat.Message{u("Translate to French.\n\nGood morning")}, id: "0",
		},
		{
			name: "alpaca with empty input",
			line: `{"instruction":"Name a color.","input":"","output":"Red"}`,
			want: []chat.Message{u("Name a color.")}, id: "0",
		},
		{
			name: "auto prefers conversations over a null messages column",
			line: `{"messages":null,"conversations":[{"from":"human","value":"Q"}]}`,
			want: []chat.Message{u("Q")}, id: "0",
		},
		{
			name: "string id field", opts: Options{Selection: Selection{IDField: "uuid"}},
			line: `{"uuid":"ab-12","prompt":"p"}`, want: []chat.Message{u("p")}, id: "ab-12",
		},
		{
			name: "numeric id keeps every digit", opts: Options{Selection: Selection{IDField: "id"}},
			line: `{"id":12345678901234567890,"prompt":"p"}`, want: []chat.Message{u("p")}, id: "12345678901234567890",
		},
		{
			name: "numeric id with exponent in decimal", opts: Options{Selection: Selection{IDField: "id"}},
			line: `{"id":1e3,"prompt":"p"}`, want: []chat.Message{u("p")}, id: "1000",
		},
		{
			name: "source field renamed", opts: Options{SourceField: "category"},
			line: `{"prompt":"p","category":"math","source":"no"}`, want: []chat.Message{u("p")}, id: "0", source: "math",
		},
		{
			name: "numeric source as text",
			line: `{"prompt":"p","source":7}`, want: []chat.Message{u("p")}, id: "0", source: "7",
		},
		{
			name: "openai batch request, auto: custom_id is the id, the body's fields are the row's own",
			line: batchLine("req-7", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"}],"temperature":0,"max_tokens":100,"top_k":20,"stop":["\n\n"],"stream":true,"n":1}`),
			want: []chat.Message{sy("S"), u("Q")}, id: "req-7", model: "gpt-4o-mini",
			params: map[string]any{"temperature": json.Number("0"), "max_tokens": json.Number("100"), "top_k": json.Number("20"), "stop": []any{"\n\n"}},
		},
		{
			name: "openai batch request forced, numbers kept as written, turns as given",
			opts: Options{Selection: Selection{Format: "openai-batch"}},
			line: batchLine("r", `{"messages":[{"role":"user","content":"Q1"},{"role":"assistant","content":"A1"},{"role":"tool","content":"42"},{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}],"temperature":0.70,"seed":12345678901234567890,"response_format":{"type":"json_object"}}`),
			want: []chat.Message{u("Q1"), as("A1"), {Role: "tool", Content: "42"}, u("one\ntwo")}, id: "r",
			params: map[string]any{"temperature": json.Number("0.70"), "seed": json.Number("12345678901234567890"), "response_format": map[string]any{"type": "json_object"}},
		},
		{
			name: "openai batch request, a null field is left out: the job's value applies",
			line: batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"max_tokens":null,"temperature":0}`),
			want: []chat.Message{u("Q")}, id: "r",
			params: map[string]any{"temperature": json.Number("0")},
		},
		{
			name: "openai batch request without method and url, numeric custom_id",
			line: `{"custom_id":17,"body":{"messages":[{"role":"developer","content":"D"},{"role":"user","content":"Q"}]}}`,
			want: []chat.Message{sy("D"), u("Q")}, id: "17",
		},
		{
			name: "openai batch request, id field wins over custom_id", opts: Options{Selection: Selection{IDField: "uuid"}},
			line: `{"uuid":"u1","custom_id":"c1","body":{"messages":[{"role":"user","content":"Q"}]}}`,
			want: []chat.Message{u("Q")}, id: "u1",
		},
		{
			name: "batch content not text", line: batchLine("r", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":7}]}`),
			field: "body.messages[1].content", err: ErrNotText, msg: "body.messages[1].content: not text",
		},
		{
			name: "batch image part is not text", line: batchLine("r", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`),
			field: "body.messages[0].content", err: ErrNotText,
			msg: "body.messages[0].content: not text: content[0].type: unsupported content part image_url",
		},
		{
			name: "batch null content", line: batchLine("r", `{"messages":[{"role":"user","content":null}]}`),
			field: "body.messages[0].content", err: ErrMissing,
		},
		{
			name: "batch turn with tool calls", line: batchLine("r", `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"","tool_calls":[{"id":"c"}]}]}`),
			field: "body.messages[1].tool_calls[0].function", msg: "body.messages[1].tool_calls[0].function: missing",
		},
		{
			name: "batch unknown role", line: batchLine("r", `{"messages":[{"role":"function","content":"x"}]}`),
			field: "body.messages[0].role", msg: `body.messages[0].role: unknown role "function"`,
		},
		{
			name: "batch embeddings url", line: `{"custom_id":"r","method":"POST","url":"/v1/embeddings","body":{"input":"x"}}`,
			field: "url", msg: `url: "/v1/embeddings", want "/v1/chat/completions": only chat completions are asked`,
		},
		{
			name: "batch GET", line: `{"custom_id":"r","method":"GET","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"Q"}]}}`,
			field: "method", msg: `method: "GET", want "POST": only chat completions are asked`,
		},
		{
			name: "batch temperature hot", line: batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"temperature":"hot"}`),
			field: "body.temperature", msg: `body.temperature: "hot", want a number from 0 to 2`,
		},
		{
			name: "batch max_tokens 1e30", line: batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"max_tokens":1e30}`),
			field: "body.max_tokens", msg: "body.max_tokens: 1e30, want a whole number from 1 to 16777216",
		},
		{
			name: "batch max_tokens 3.7", line: batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"max_tokens":3.7}`),
			field: "body.max_tokens", msg: "body.max_tokens: 3.7, want a whole number from 1 to 16777216",
		},
		{
			name: "batch top_p 5", line: batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"top_p":5}`),
			field: "body.top_p", msg: "body.top_p: 5, want a number above 0, at most 1",
		},
		{
			name: "batch n of 4", line: batchLine("r", `{"messages":[{"role":"user","content":"Q"}],"n":4}`),
			field: "body.n", msg: "body.n: 4: samples per prompt come from generation.n; a row asks for one",
		},
		{
			name: "batch body not an object", line: `{"custom_id":"r","body":"hi"}`,
			field: "body", err: ErrNotObject,
		},
		{
			name: "batch forced, body missing", opts: Options{Selection: Selection{Format: "openai-batch"}}, line: `{"custom_id":"r"}`,
			field: "body", err: ErrMissing,
		},
		{
			name: "batch empty custom_id", line: batchLine("", `{"messages":[{"role":"user","content":"Q"}]}`),
			field: "custom_id", err: ErrEmpty,
		},
		{
			name: "batch no messages", line: batchLine("r", `{"model":"m"}`),
			field: "body.messages", err: ErrMissing, msg: "body.messages: missing",
		},
		{
			name: "batch model not a string", line: batchLine("r", `{"model":3,"messages":[{"role":"user","content":"Q"}]}`),
			field: "body.model", err: ErrNotString,
		},
		{
			name: "value not a string", line: `{"conversations":[{"from":"human","value":5}]}`,
			field: "conversations[0].value", err: ErrNotString, msg: "conversations[0].value: not a string",
		},
		{
			name: "assistant first", line: sharegptLine("x", "gpt", "hi", "human", "q"),
			field: "conversations", err: ErrNoUserTurn, msg: "conversations: no user turn before the first assistant turn",
		},
		{
			name: "system only", line: sharegptLine("x", "system", "S"),
			field: "conversations", err: ErrNoUserTurn,
		},
		{
			name: "empty conversations", line: `{"conversations":[]}`,
			field: "conversations", err: ErrEmpty, msg: "conversations: empty",
		},
		{
			name: "conversations not a list", line: `{"conversations":"hi"}`,
			field: "conversations", err: ErrNotList,
		},
		{
			name: "turn not an object", line: `{"conversations":["hi"]}`,
			field: "conversations[0]", err: ErrNotObject,
		},
		{
			name: "unknown role", line: sharegptLine("x", "robot", "t", "human", "q"),
			field: "conversations[0].from", msg: `conversations[0].from: unknown role "robot"`,
		},
		{
			name: "blank user turn", line: sharegptLine("x", "human", "  \n", "gpt", "a"),
			field: "conversations[0].value", err: ErrEmpty,
		},
		{
			name: "missing value", line: `{"conversations":[{"from":"human"}]}`,
			field: "conversations[0].value", err: ErrMissing,
		},
		{
			name: "image part", line: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`,
			field: "messages[0].content[0].type", msg: `messages[0].content[0].type: unsupported content part image_url`,
		},
		{
			name: "forced sharegpt on a messages row", opts: Options{Selection: Selection{Format: "sharegpt"}},
			line: `{"messages":[{"role":"user","content":"Q"}]}`, field: "conversations", err: ErrMissing,
		},
		{
			name: "no known shape", line: `{"text":"hello"}`,
			err: ErrUnknownShape, msg: "no conversations, messages, prompt, instruction, or custom_id and body field",
		},
		{
			name: "id field missing", opts: Options{Selection: Selection{IDField: "id"}}, line: `{"prompt":"p"}`,
			field: "id", err: ErrMissing, msg: "id: missing",
		},
		{
			name: "id field of another type", opts: Options{Selection: Selection{IDField: "id"}}, line: `{"id":[1],"prompt":"p"}`,
			field: "id", msg: "id: not a string or number",
		},
		{
			name: "alpaca instruction not a string", line: `{"instruction":3}`,
			field: "instruction", err: ErrNotString,
		},
		{
			name: "invalid JSON", line: `{"conversations":[`,
			msg: "invalid JSON: unexpected end of line",
		},
		{
			name: "two objects on a line", line: `{"prompt":"a"} {"prompt":"b"}`,
			msg: "invalid JSON: data after the object",
		},
		{
			name: "not an object", line: `["prompt"]`, msg: "not a JSON object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "data.jsonl", tt.line+"\n")
			opts := tt.opts
			opts.Path, opts.OnBadRow = path, "fail"
			r, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			p, err := r.Next()
			bad := tt.field != "" || tt.err != nil || tt.msg != ""
			if !bad {
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				if !reflect.DeepEqual(p.Messages, tt.want) {
					t.Errorf("messages = %q, want %q", p.Messages, tt.want)
				}
				if !reflect.DeepEqual(p.Params, tt.params) || p.Model != tt.model {
					t.Errorf("params, model = %#v, %q; want %#v, %q", p.Params, p.Model, tt.params, tt.model)
				}
				if p.ID != tt.id || p.Source != tt.source {
					t.Errorf("id, source = %q, %q; want %q, %q", p.ID, p.Source, tt.id, tt.source)
				}
				if p.Location != path+":1" {
					t.Errorf("location = %q, want %q", p.Location, path+":1")
				}
				return
			}
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("Next = %v, %v; want a *RowError", p, err)
			}
			if re.Field != tt.field || re.File != path || re.Line != 1 || re.Row != 0 {
				t.Errorf("RowError{File %q Line %d Row %d Field %q}, want field %q at %s:1 row 0", re.File, re.Line, re.Row, re.Field, tt.field, path)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("error %v is not %v", err, tt.err)
			}
			if tt.msg != "" && err.Error() != path+":1: "+tt.msg {
				t.Errorf("error = %q, want %q", err, path+":1: "+tt.msg)
			}
			if !strings.HasPrefix(err.Error(), filepath.Join(filepath.Dir(path), "data.jsonl:1: ")) {
				t.Errorf("error %q does not start with file:line", err)
			}
		})
	}
}

// TestWholeConversations: with Options.Conversations a multi-turn row
// yields every turn, assistant turns as empty placeholders for the model's
// answers; Messages stays the first prompt; single-prompt shapes have no
// conversation; a conversation that starts with an answer is a bad row.
func TestWholeConversations(t *testing.T) {
	path := writeFile(t, t.TempDir(), "rows.jsonl", strings.Join([]string{
		`{"conversations":[{"from":"system","value":"sys"},{"from":"human","value":"q1"},{"from":"gpt","value":"a1"},{"from":"human","value":"q2"},{"from":"gpt","value":"a2"}]}`,
		`{"messages":[{"role":"user","content":"m1"},{"role":"assistant","content":"x"},{"role":"user","content":"m2"}]}`,
		`{"prompt":"just one"}`,
		`{"conversations":[{"from":"gpt","value":"a0"},{"from":"human","value":"q"}]}`,
	}, "\n")+"\n")
	ps, skipped := readAll(t, Options{Selection: Selection{Path: path}, Conversations: true})
	if len(ps) != 3 || len(skipped) != 1 || skipped[0].Row != 3 || skipped[0].Field != "conversations" {
		t.Fatalf("prompts %+v, skipped %v", ps, skipped)
	}
	want := []chat.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "q1"}, {Role: "assistant", Content: ""}, {Role: "user", Content: "q2"}, {Role: "assistant", Content: ""}}
	if !reflect.DeepEqual(ps[0].Conversation, want) || !reflect.DeepEqual(ps[0].Messages, want[:2]) {
		t.Errorf("sharegpt: conversation %+v, messages %+v", ps[0].Conversation, ps[0].Messages)
	}
	want = []chat.Message{{Role: "user", Content: "m1"}, {Role: "assistant", Content: ""}, {Role: "user", Content: "m2"}}
	if !reflect.DeepEqual(ps[1].Conversation, want) {
		t.Errorf("messages: conversation %+v", ps[1].Conversation)
	}
	if ps[2].Conversation != nil || len(ps[2].Messages) != 1 {
		t.Errorf("prompt shape: conversation %+v, messages %+v", ps[2].Conversation, ps[2].Messages)
	}
	// Without the option nothing changes.
	ps, _ = readAll(t, Options{Selection: Selection{Path: path}})
	if ps[0].Conversation != nil {
		t.Errorf("conversation read without Options.Conversations: %+v", ps[0].Conversation)
	}
}

// TestParamsColumn: dataset.params_field reads a row's own request fields;
// what it cannot mean is a bad row naming the field.
func TestParamsColumn(t *testing.T) {
	path := writeFile(t, t.TempDir(), "rows.jsonl", strings.Join([]string{
		`{"prompt":"a","p":{"temperature":0,"seed":7,"model":"x"}}`,
		`{"prompt":"b"}`,
		`{"prompt":"c","p":null}`,
		`{"prompt":"d","p":"hot"}`,
		`{"prompt":"e","p":{"n":2}}`,
		`{"prompt":"f","p":{"messages":[]}}`,
	}, "\n")+"\n")
	ps, skipped := readAll(t, Options{Selection: Selection{Path: path, ParamsField: "p"}})
	if len(ps) != 3 {
		t.Fatalf("prompts %+v", ps)
	}
	if p := ps[0].Params; len(p) != 2 || fmt.Sprint(p["temperature"]) != "0" || fmt.Sprint(p["seed"]) != "7" || ps[0].Model != "x" {
		t.Errorf("row a: params %v, model %q", p, ps[0].Model)
	}
	if ps[1].Params != nil || ps[2].Params != nil {
		t.Errorf("rows without the column have params: %v %v", ps[1].Params, ps[2].Params)
	}
	var fields []string
	for _, e := range skipped {
		fields = append(fields, e.Field)
	}
	if want := []string{"p", "p.n", "p.messages"}; !slices.Equal(fields, want) {
		t.Errorf("bad rows name %v, want %v", fields, want)
	}
}
