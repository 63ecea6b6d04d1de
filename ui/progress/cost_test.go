package progress

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats"
)

// TestDollars: under a cent at least two significant digits show, so a
// cheap answer (a batch's, at half price) never reads $0.0000.
func TestDollars(t *testing.T) {
	for v, want := range map[float64]string{
		0: "$0", 0.0000136: "$0.000014", 0.00045: "$0.00045", 0.005: "$0.0050",
		0.0123: "$0.01", 3.1: "$3.10", 1234.4: "$1234",
	} {
		if got := dollars(v); got != want {
			t.Errorf("dollars(%v) = %q, want %q", v, got, want)
		}
	}
}

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
