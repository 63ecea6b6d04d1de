package pool

// wire speaks in its own types, not the record's: what was sent and the
// logprobs that came reach the record here, where it is built. Each pair
// has the same fields, which the conversions below check at compile time (a
// struct converts to another only when their fields are identical, tags
// aside).

import (
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

var (
	_ = sink.Logprobs(wire.Logprobs{})
	_ = sink.ToolFunction(wire.ToolFunction{})
)

// wireMessages is msgs as the request's messages. A copy of a few string
// headers a request, next to an HTTP round trip, is not worth an unsafe
// view of the record's memory.
func wireMessages(msgs []sink.Message) []wire.Message {
	if msgs == nil {
		return nil
	}
	out := make([]wire.Message, len(msgs))
	for i, m := range msgs {
		out[i] = wire.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		if len(m.ToolCalls) > 0 {
			out[i].ToolCalls = make([]wire.ToolCall, len(m.ToolCalls))
			for k, c := range m.ToolCalls {
				out[i].ToolCalls[k] = wire.ToolCall{ID: c.ID, Type: c.Type, Function: wire.ToolFunction(c.Function)}
			}
		}
	}
	return out
}

// recordToolCalls is an answer's tool calls as the record holds them.
func recordToolCalls(calls []wire.ToolCall) []sink.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]sink.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = sink.ToolCall{ID: c.ID, Type: c.Type, Function: sink.ToolFunction(c.Function)}
	}
	return out
}

// recordLogprobs is an answer's logprobs as the record holds them.
func recordLogprobs(l *wire.Logprobs) *sink.Logprobs { return (*sink.Logprobs)(l) }
