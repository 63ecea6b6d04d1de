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
	if s.Done > 0 {
		text += ", ~" + human.Dollars(s.CostProjected) + " projected"
	}
	return text
}
