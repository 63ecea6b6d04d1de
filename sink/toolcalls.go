package sink

import "encoding/json"

// InvalidToolCalls is how many of calls have arguments that are not valid
// JSON: the record's tool_calls_invalid. A model's malformed arguments are
// what a drafter must learn to predict too, so they are kept as sent and
// counted, never repaired.
func InvalidToolCalls(calls []ToolCall) int {
	n := 0
	for _, c := range calls {
		if !json.Valid([]byte(c.Function.Arguments)) {
			n++
		}
	}
	return n
}
