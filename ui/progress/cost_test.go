package progress

import (
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
