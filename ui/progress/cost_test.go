package progress

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats"
)

// TestCostTextBilled: answers billed but not kept show apart from the
// kept answers' cost, and only when there are some.
func TestCostTextBilled(t *testing.T) {
	s := runstats.Snapshot{Priced: true, Cost: 0.5, Billed: 0.5}
	if got := costText(s); strings.Contains(got, "billed") {
		t.Errorf("%q: says billed with nothing thrown away", got)
	}
	s.Billed = 0.75
	if got := costText(s); !strings.Contains(got, "$0.50 so far ($0.75 billed)") {
		t.Errorf("%q: want the billed figure beside the cost", got)
	}
}

// TestSummaryOfABatchRun: a batch-mode run streams nothing and its
// answers are cheap (half price): its summary shows no latency line of
// zeros ("ttft p50 0"), and each answer's cost with significant digits,
// not $0.0000 (issue 41).
func TestSummaryOfABatchRun(t *testing.T) {
	p := runstats.Price{Input: 0.075, Output: 0.3}
	stats := runstats.NewStats(nil)
	stats.SetTotal(2)
	stats.SetPrice(p)
	for range 2 {
		stats.Begin().Done(runstats.Outcome{PromptTokens: 20, CompletionTokens: 50, UsageKnown: true, FinishReason: "stop",
			Cost: 0.5 * p.Cost(20, 0, 50)})
	}
	got := New(&bytes.Buffer{}, Options{}).Summary(stats, "done")
	if strings.Contains(got, "ttft") || strings.Contains(got, "latency") {
		t.Errorf("a run that streamed nothing shows a latency:\n%s", got)
	}
	// 0.5 × (20 × 0.075 + 50 × 0.3) / 1e6 = $0.00000825 an answer.
	if !regexp.MustCompile(`cost +\$0\.0000165 +\$0\.00000825 an answer`).MatchString(got) {
		t.Errorf("the cost of a cheap answer:\n%s", got)
	}
}
