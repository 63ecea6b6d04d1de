package progress

import (
	"fmt"
	"math"

	"github.com/synthgen/synthgen/generator/runstats"
)

// costText is the progress line's cost: "$3.10 so far, ~$12.40 projected",
// or "" without a price. Cents below $100, whole dollars above, and more
// digits under a cent, where a small test run's cost lies.
func costText(s runstats.Snapshot) string {
	if !s.Priced {
		return ""
	}
	text := dollars(s.Cost) + " so far"
	if billedApart(s) {
		// Answers thrown away were billed too: said apart, so the kept
		// answers' cost stays what the records sum to.
		text += " (" + dollars(s.Billed) + " billed)"
	}
	if s.Done > 0 {
		text += ", ~" + dollars(s.CostProjected) + " projected"
	}
	return text
}

// billedApart says the run was billed for answers it did not keep (by more
// than rounding): only then is the billed figure shown beside the cost.
func billedApart(s runstats.Snapshot) bool {
	return s.Billed > s.Cost*(1+1e-9)
}

// dollars is v in USD: under a cent with at least two significant digits,
// so that a cheap answer never reads $0.0000.
func dollars(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		digits := max(4, 1-int(math.Floor(math.Log10(v))))
		return fmt.Sprintf("$%.*f", digits, v)
	case v < 100:
		return fmt.Sprintf("$%.2f", v)
	default:
		return fmt.Sprintf("$%.0f", v)
	}
}
