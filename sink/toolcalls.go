package sink

import (
	"encoding/json"
	"slices"

	"github.com/synthgen/synthgen/chat"
)

// InvalidToolCalls is how many of calls have arguments that are not valid
// JSON: the record's tool_calls_invalid. A model's malformed arguments are
// what a drafter must learn to predict too, so they are kept as sent and
// counted, never repaired.
func InvalidToolCalls(calls []chat.ToolCall) int {
	n := 0
	for _, c := range calls {
		if !json.Valid([]byte(c.Function.Arguments)) {
			n++
		}
	}
	return n
}

// addedMessageColumn: a message's tool columns, which parts written before
// them lack (their turns read without calls).
func addedMessageColumn(col []string) bool {
	return len(col) > 1 && col[0] == "messages" && (slices.Contains(col, "tool_calls") || slices.Contains(col, "tool_call_id"))
}

// emptyToolsNil makes the empty lists a Parquet row reads nil, as the
// JSONL line has them (omitted).
func (r *Record) emptyToolsNil() {
	if len(r.ToolCalls) == 0 {
		r.ToolCalls = nil
	}
	for i := range r.Messages {
		if len(r.Messages[i].ToolCalls) == 0 {
			r.Messages[i].ToolCalls = nil
		}
	}
	for i := range r.Turns {
		if len(r.Turns[i].ToolCalls) == 0 {
			r.Turns[i].ToolCalls = nil
		}
	}
}
