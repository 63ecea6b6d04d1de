package sink

import (
	"reflect"
	"testing"

	"github.com/synthgen/synthgen/chat"
)

// toolRecord is testRecord(i) answered with a tool call after a
// conversation that holds one, as a tool row's record is.
func toolRecord(i int) *Record {
	r := testRecord(i)
	r.Messages = append(r.Messages,
		chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
		chat.Message{Role: "tool", Content: "18C", ToolCallID: "c1"})
	r.Content, r.FinishReason = "", "tool_calls"
	r.Tools = `[{"function":{"name":"get_weather","parameters":{"type":"object"}},"type":"function"}]`
	r.ToolCalls = []chat.ToolCall{{ID: "chatcmpl-tool-1", Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: `{"city": "Par`}},
		{ID: "chatcmpl-tool-2", Type: "function", Function: chat.ToolFunction{Name: "add", Arguments: `{}`}}}
	r.ToolCallsInvalid = InvalidToolCalls(r.ToolCalls)
	return r
}

// testToolCallsReadBack: a record's tool calls, the message's calls and
// call ids, and the tools sent read back as written, from JSONL and from
// Parquet; plain records beside them keep none.
func testToolCallsReadBack(t *testing.T, format string) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, format))
	var want []Record
	for i := range 4 {
		r := testRecord(i)
		if i%2 == 1 {
			r = toolRecord(i)
		}
		r.Turns = nil
		want = append(want, *r)
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readParts(t, dir)
	for i := range got {
		got[i].CreatedAt = got[i].CreatedAt.UTC()
		got[i].emptyTokensNil()
		got[i].emptyToolsNil()
		got[i].Turns = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back differs:\n got %+v\nwant %+v", got[1], want[1])
	}
	if got[1].ToolCallsInvalid != 1 {
		t.Errorf("tool_calls_invalid %d, want 1", got[1].ToolCallsInvalid)
	}
}
