package pool

import (
	"fmt"

	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/sink"
)

// A reasoning model served by vLLM started without --reasoning-parser
// answers with its whole thought inside content (in <think> tags) and no
// reasoning field: every record then has "reasoning": "" and nothing
// fails. The Engine looks at a run's first answers for that server, and
// for answers with no reasoning at all, and says so once, early;
// generation.require_reasoning makes it fatal.

// ReasoningParserHint is what to do about a *NoReasoningError on a server
// of kind k: each server has its own switch (vLLM's and SGLang's parser
// names differ in spelling); for a server of unknown kind, all three.
func ReasoningParserHint(k promscrape.Kind) string {
	switch k {
	case promscrape.KindVLLM:
		return "if the model reasons, start vLLM with --reasoning-parser <name> (e.g. deepseek_r1, qwen3)"
	case promscrape.KindSGLang:
		return "if the model reasons, start SGLang with --reasoning-parser <name> (e.g. deepseek-r1, qwen3)"
	case promscrape.KindLlamaCpp:
		return "if the model reasons, start llama-server with --reasoning-format deepseek"
	}
	return "if the model reasons, start its server with a reasoning parser: vLLM and SGLang --reasoning-parser <name> (e.g. deepseek_r1, qwen3), llama.cpp's llama-server --reasoning-format deepseek"
}

// ReasoningSample is how many of a run's first answers the check reads.
const ReasoningSample = 20

// NoReasoningError says a run's first answers came without reasoning:
// with the model's thought in think tags inside content (a server with no
// reasoning parser), or with no reasoning anywhere (a model that does not
// reason, or a server that drops it).
type NoReasoningError struct {
	Checked int // answers looked at
	Empty   int // of them, with no reasoning
	Tagged  int // of them, with no reasoning and think tags in content
	// Server is the kind of server that answered (ReasoningPolicy.Server).
	Server promscrape.Kind
}

// Hint is what to do about it on its kind of server.
func (e *NoReasoningError) Hint() string { return ReasoningParserHint(e.Server) }

func (e *NoReasoningError) Error() string {
	if e.InContent() {
		return fmt.Sprintf("%d of the first %d answers have no reasoning, and %d carry <think> tags in their content: the server does not separate the model's reasoning",
			e.Empty, e.Checked, e.Tagged)
	}
	return fmt.Sprintf("%d of the first %d answers have no reasoning field at all, nor <think> tags in their content: the model does not reason, or the server sends no reasoning",
		e.Empty, e.Checked)
}

// InContent says the reasoning is inside content, in think tags.
func (e *NoReasoningError) InContent() bool { return e.Tagged*2 >= e.Checked }

// reasoningCheck reads the first want answers a run writes (or all of them,
// when fewer come) and decides once whether they are a parser-less server's.
// The Engine's writer goroutine owns it.
type reasoningCheck struct {
	want                int
	server              promscrape.Kind // told to the error
	seen, empty, tagged int
	decided             bool
}

// observe counts rec; once want answers are in, it decides: the error when
// they look parser-less, nil otherwise (and nil ever after).
func (c *reasoningCheck) observe(rec *sink.Record) *NoReasoningError {
	if c == nil || c.decided {
		return nil
	}
	c.seen++
	if rec.Reasoning == "" {
		c.empty++
		if sink.ThinkTags(rec.Content) {
			c.tagged++
		}
	}
	if c.seen < c.want {
		return nil
	}
	return c.decide()
}

// end decides on the answers seen when the run wrote fewer than want.
func (c *reasoningCheck) end() *NoReasoningError {
	if c == nil || c.decided || c.seen == 0 {
		return nil
	}
	return c.decide()
}

// decide: (nearly) all without reasoning, whether or not they carry think
// tags (with them: a server without a reasoning parser; without: a model
// that does not reason, or a server that sends none, said so that a
// training file without reasoning is no surprise).
func (c *reasoningCheck) decide() *NoReasoningError {
	c.decided = true
	if c.empty*10 >= c.seen*9 {
		return &NoReasoningError{Checked: c.seen, Empty: c.empty, Tagged: c.tagged, Server: c.server}
	}
	return nil
}
