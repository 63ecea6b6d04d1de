package wire

import (
	"context"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
)

// vllmCalls are the calls of plain_both_content_null_tool_calls.json and
// stream_tool_calls.sse, as the server sent them.
var vllmCalls = []chat.ToolCall{
	{ID: "chatcmpl-tool-9cfff31470c8d39b", Type: "function", Function: chat.ToolFunction{Name: "add", Arguments: `{"a": 3, "b": 5}`}},
	{ID: "chatcmpl-tool-afe2dd0e7aedad5f", Type: "function", Function: chat.ToolFunction{Name: "multiply", Arguments: `{"a": 8, "b": 8}`}},
}

// TestToolCallsFromAnswers: a plain answer's tool_calls and a stream's
// deltas (assembled by index: id, type and name from the first, arguments
// concatenated in order) come out as vLLM sent them, reasoning beside
// them and finish_reason tool_calls.
func TestToolCallsFromAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file   string
		stream bool
	}{
		{"plain_both_content_null_tool_calls.json", false},
		{"stream_tool_calls.sse", true},
	} {
		t.Run(tt.file, func(t *testing.T) {
			s := httptest.NewServer(replay(t, tt.file))
			defer s.Close()
			got, err := New(Options{BaseURL: s.URL}).Complete(context.Background(), userReq(tt.stream), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.ToolCalls, vllmCalls) || got.FinishReason != "tool_calls" || got.Content != "" {
				t.Errorf("calls %+v, finish %q, content %q; want %+v, tool_calls", got.ToolCalls, got.FinishReason, got.Content, vllmCalls)
			}
			if got.Reasoning == "" {
				t.Error("the reasoning beside the calls was lost")
			}
		})
	}
}

// TestToolCallsAssembledByIndex: calls interleaved by index, a name in a
// later delta, arguments that are not JSON (kept as sent), an index with
// no id, a delta whose fields are all null (as some servers send them).
func TestToolCallsAssembledByIndex(t *testing.T) {
	t.Parallel()
	var a answer
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{\"x\""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"[1,"}},{"index":0,"function":{"name":"f","arguments":": 1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":null}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"ignored","function":{"arguments":"2"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		d, err := decodeChunk([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		a.add(&d)
	}
	r := a.result()
	want := []chat.ToolCall{
		{ID: "b", Type: "function", Function: chat.ToolFunction{Name: "g", Arguments: "[1,2"}},
		{ID: "a", Function: chat.ToolFunction{Name: "f", Arguments: `{"x": 1}`}},
	}
	if !reflect.DeepEqual(r.ToolCalls, want) || r.Chunks != 5 {
		t.Errorf("calls %+v (%d chunks), want %+v", r.ToolCalls, r.Chunks, want)
	}
}

// TestEncodeRequestTools: the row's tools and tool_choice (auto unless the
// job or the row says otherwise) follow the messages, whose tool calls and
// call ids go as the row had them; no tools, neither key.
func TestEncodeRequestTools(t *testing.T) {
	t.Parallel()
	tools := `[{"type":"function","function":{"name":"f","description":"<x>"}}]`
	req := Request{Messages: []chat.Message{
		{Role: "user", Content: "Q"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.ToolFunction{Name: "f", Arguments: `{"a":"<b>"}`}}}},
		{Role: "tool", Content: "r", ToolCallID: "c1"},
	}, Tools: tools}
	req.Model = "m"
	body, err := EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"user","content":"Q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":\"<b>\"}"}}]},{"role":"tool","content":"r","tool_call_id":"c1"}],"tools":` + tools + `,"tool_choice":"auto","temperature":0,"stream":false}`
	if string(body) != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	req.ToolChoice = "required"
	if body, _ = EncodeRequest(req); !strings.Contains(string(body), `,"tool_choice":"required",`) {
		t.Errorf("the job's tool_choice not sent: %s", body)
	}
	req.Params = map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}
	if body, _ = EncodeRequest(req); strings.Count(string(body), `"tool_choice"`) != 1 || !strings.Contains(string(body), `"tool_choice":{"function":{"name":"f"},"type":"function"}`) {
		t.Errorf("the row's tool_choice does not replace the job's: %s", body)
	}
	req.Tools, req.Params = "", nil
	if body, _ = EncodeRequest(req); strings.Contains(string(body), "tool_choice") || strings.Contains(string(body), `"tools"`) {
		t.Errorf("a row without tools sent tool fields: %s", body)
	}
}
