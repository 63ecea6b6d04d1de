package export

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// TestMessagesCarryToolCalls: --format messages writes the tools offered,
// the row's tool turns as sent and the model's calls on its assistant
// turn, in JSONL and in Parquet; a record without tools has none of the
// keys.
func TestMessagesCarryToolCalls(t *testing.T) {
	t.Parallel()
	recs := fixtureRecords()[:1]
	tool := *recs[0]
	tool.ID, tool.Sample, tool.Content, tool.Reasoning, tool.FinishReason = "t", 0, "", "Call it.", "tool_calls"
	tool.Messages = []chat.Message{{Role: "user", Content: "Q"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c0", Type: "function", Function: chat.ToolFunction{Name: "f", Arguments: `{}`}}}},
		{Role: "tool", Content: "r", ToolCallID: "c0"}}
	tool.Tools = `[{"function":{"name":"f"},"type":"function"}]`
	tool.ToolCalls = []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.ToolFunction{Name: "f", Arguments: `{"a": 1`}}}
	dir := writeDir(t, sink.FormatJSONL, 10, append(recs, &tool)...)
	tmp := t.TempDir()
	run(t, options(t, FormatMessages, filepath.Join(tmp, "m.jsonl"), dir))
	run(t, options(t, FormatMessages, filepath.Join(tmp, "m.parquet"), dir))
	data, _ := os.ReadFile(filepath.Join(tmp, "m.jsonl"))
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	want := `{"id":"t","messages":[{"role":"user","content":"Q"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c0","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","content":"r","tool_call_id":"c0"},` +
		`{"role":"assistant","content":"","reasoning_content":"Call it.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1"}}]}],` +
		`"tools":"[{\"function\":{\"name\":\"f\"},\"type\":\"function\"}]"}`
	if len(lines) != 2 || bytes.Contains(lines[0], []byte("tool")) || string(lines[1]) != want {
		t.Fatalf("messages export:\n%s\nwant a plain first line, then\n%s", data, want)
	}
	rows := readParquet[messagesRow](t, filepath.Join(tmp, "m.parquet"))
	var fromJSON messagesRow
	if err := json.Unmarshal(lines[1], &fromJSON); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(rows[1])
	w, _ := json.Marshal(fromJSON)
	if len(rows) != 2 || !bytes.Equal(g, w) {
		t.Errorf("Parquet row\n%s\nwant\n%s", g, w)
	}
}
