package audit

import "github.com/synthgen/synthgen/sink"

// ToolCounts are the answers' tool calls: the records whose answer calls
// a tool, the calls, and the calls whose arguments are not valid JSON
// (kept as the model sent them: a trainer may want them out).
type ToolCounts struct {
	ToolCallRecords  int64 `json:"tool_call_records"`
	ToolCalls        int64 `json:"tool_calls"`
	InvalidToolCalls int64 `json:"invalid_tool_calls"`
}

func (c *ToolCounts) add(rec *sink.Record) {
	if len(rec.ToolCalls) == 0 {
		return
	}
	c.ToolCallRecords++
	c.ToolCalls += int64(len(rec.ToolCalls))
	c.InvalidToolCalls += int64(rec.ToolCallsInvalid)
}

func (c *ToolCounts) sum(o ToolCounts) {
	c.ToolCallRecords += o.ToolCallRecords
	c.ToolCalls += o.ToolCalls
	c.InvalidToolCalls += o.InvalidToolCalls
}
