package pool

import (
	"fmt"

	"github.com/synthgen/synthgen/sink"
)

// A reasoning model served by vLLM started without --reasoning-parser
// answers with its whole thought inside content (in <think> tags) and no
// reasoning field: every record then has "reasoning": "" and nothing
// fails. The Engine looks at a run's first answers for that server and
// says so once, early; generation.require_reasoning makes it fatal.

// ReasoningParserHint is what to do about a *NoReasoningError.
const ReasoningParserHint = "start vLLM with --reasoning-parser <name> (e.g. deepseek_r1, qwen3): the model's reasoning arrives inside content"

// ReasoningSample is how many of a run's first answers the check reads.
const ReasoningSample = 20

// NoReasoningError says a run's first answers came without reasoning and
// with the model's thought in think tags inside content.
type NoReasoningError struct {
	Checked int // answers looked at
	Empty   int // of them, with no reasoning
	Tagged  int // of them, with no reasoning and think tags in content
}

func (e *NoReasoningError) Error() string {
	return fmt.Sprintf("%d of the first %d answers have no reasoning, and %d carry <think> tags in their content: the server does not separate the model's reasoning",
		e.Empty, e.Checked, e.Tagged)
}

// reasoningCheck reads the first want answers a run writes (or all of them,
// when fewer come) and decides once whether they are a parser-less server's.
// The Engine's writer goroutine owns it.
type reasoningCheck struct {
	want                int
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

// decide: (nearly) all without reasoning, and most of them with think tags.
// A model that does not reason (no tags) is no finding.
func (c *reasoningCheck) decide() *NoReasoningError {
	c.decided = true
	if c.empty*10 >= c.seen*9 && c.tagged*2 >= c.seen {
		return &NoReasoningError{Checked: c.seen, Empty: c.empty, Tagged: c.tagged}
	}
	return nil
}
