package pool

// wire speaks in its own types, not the record's: what was sent and the
// logprobs that came reach the record here, where it is built, without a
// copy. Each pair has the same fields in the same order, which the
// conversions below check at compile time (a struct converts to another
// only when their fields are identical, tags aside), so one's memory is the
// other's.

import (
	"unsafe"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

var (
	_ = wire.Message(sink.Message{})
	_ = sink.Logprobs(wire.Logprobs{})
)

// wireMessages is msgs as the request's messages: the same memory, so a
// request costs no copy of its conversation.
func wireMessages(msgs []sink.Message) []wire.Message {
	return unsafe.Slice((*wire.Message)(unsafe.Pointer(unsafe.SliceData(msgs))), len(msgs))
}

// recordLogprobs is an answer's logprobs as the record holds them.
func recordLogprobs(l *wire.Logprobs) *sink.Logprobs { return (*sink.Logprobs)(l) }
