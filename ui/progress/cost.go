package progress

import (
	"fmt"

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
	if s.Done > 0 {
		text += ", ~" + dollars(s.CostProjected) + " projected"
	}
	return text
}

func dollars(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		return fmt.Sprintf("$%.4f", v)
	case v < 100:
		return fmt.Sprintf("$%.2f", v)
	default:
		return fmt.Sprintf("$%.0f", v)
	}
}
