package pool

// The conversation needs no conversion between wire and the record: both
// speak package chat, so a request sends the record's turns as they are
// and the record keeps the calls the answer brought. The logprobs are
// wire's own type (its decoder fills them) with the record's fields in
// their order; they reach the record here by a conversion, which the
// compiler allows only while the two keep identical fields.

import (
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// recordLogprobs is an answer's logprobs as the record holds them.
func recordLogprobs(l *wire.Logprobs) *sink.Logprobs { return (*sink.Logprobs)(l) }
