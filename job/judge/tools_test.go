package judge

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink/audit"
)

// TestToolCallsLine: the text report says how many records call tools and
// how many calls have arguments that are not JSON; a report without tool
// calls has no such line.
func TestToolCallsLine(t *testing.T) {
	t.Parallel()
	a := &audit.Audit{Records: 8, FinishReasons: map[string]int64{"tool_calls": 2, "stop": 6},
		ToolCounts: audit.ToolCounts{ToolCallRecords: 2, ToolCalls: 3, InvalidToolCalls: 1, Divergences: map[string]int64{"unknown_tool": 1, "parallel_calls": 2}}}
	var b strings.Builder
	finishLines(&b, a)
	if want := "tools\tcalls in 2 records (25.0%), 3 calls, arguments not JSON in 1\n"; !strings.Contains(b.String(), want) {
		t.Errorf("report\n%s\nlacks %q", b.String(), want)
	}
	if want := "diverged\tparallel_calls 2, unknown_tool 1\n"; !strings.Contains(b.String(), want) {
		t.Errorf("report\n%s\nlacks %q", b.String(), want)
	}
	a.ToolCounts = audit.ToolCounts{}
	b.Reset()
	finishLines(&b, a)
	if strings.Contains(b.String(), "tools") || strings.Contains(b.String(), "diverged") {
		t.Errorf("a report without calls says\n%s", b.String())
	}
}
