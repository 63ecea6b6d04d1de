package progress

import (
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/human"
)

// costText is the progress line's cost: "$3.10 so far, ~$12.40 projected",
// or "" without a price. Cents below $100, whole dollars above, and more
// digits under a cent, where a small test run's cost lies.
func costText(s runstats.Snapshot) string {
	if !s.Priced {
		return ""
	}
	text := human.Dollars(s.Cost) + " so far"
	if billedApart(s) {
		// Answers thrown away were billed too: said apart, so the kept
		// answers' cost stays what the records sum to.
		text += " (" + human.Dollars(s.Billed) + " billed)"
	}
	if s.Done > 0 {
		text += ", ~" + human.Dollars(s.CostProjected) + " projected"
	}
	return text
}

// billedApart says the run was billed for answers it did not keep (by more
// than rounding): only then is the billed figure shown beside the cost.
func billedApart(s runstats.Snapshot) bool {
	return s.Billed > s.Cost*(1+1e-9)
}
