package audit

import (
	"maps"
	"slices"

	"github.com/synthgen/synthgen/sink"
)

// ToolCounts are the answers' tool calls: the records whose answers call
// a tool (any turn of a whole conversation), the calls, the calls whose
// arguments are not valid JSON (kept as the model sent them: a trainer may
// want them out), and the whole conversations that left their row's path,
// by kind (sink.Diverged*).
type ToolCounts struct {
	ToolCallRecords  int64            `json:"tool_call_records"`
	ToolCalls        int64            `json:"tool_calls"`
	InvalidToolCalls int64            `json:"invalid_tool_calls"`
	Divergences      map[string]int64 `json:"divergences,omitempty"`
}

func (c *ToolCounts) add(rec *sink.Record) {
	if d := rec.Divergence; d != nil {
		if c.Divergences == nil {
			c.Divergences = map[string]int64{}
		}
		c.Divergences[d.Kind]++
	}
	calls := len(rec.ToolCalls)
	if len(rec.Turns) > 0 {
		calls = 0
		for i := range rec.Turns {
			calls += len(rec.Turns[i].ToolCalls)
		}
	}
	if calls == 0 {
		return
	}
	c.ToolCallRecords++
	c.ToolCalls += int64(calls)
	c.InvalidToolCalls += int64(rec.ToolCallsInvalid)
}

func (c *ToolCounts) sum(o ToolCounts) {
	c.ToolCallRecords += o.ToolCallRecords
	c.ToolCalls += o.ToolCalls
	c.InvalidToolCalls += o.InvalidToolCalls
	if len(o.Divergences) > 0 && c.Divergences == nil {
		c.Divergences = make(map[string]int64, len(o.Divergences))
	}
	for k, n := range o.Divergences {
		c.Divergences[k] += n
	}
}

// DivergenceKinds are the kinds of Divergences in sorted order.
func (c *ToolCounts) DivergenceKinds() []string {
	return slices.Sorted(maps.Keys(c.Divergences))
}
