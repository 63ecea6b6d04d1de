package main

import (
	"fmt"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/runstats"
)

// priceOf is endpoint.price as the runner asks it, for the model the job
// resolved to; nil without a price. An unset cached_input is the input
// price: the server is taken to bill a cached token as any other.
func priceOf(p config.Price) func(model string) (runstats.Price, bool) {
	if !p.Set() {
		return nil
	}
	return func(model string) (runstats.Price, bool) {
		tp, ok := p.For(model)
		if !ok {
			return runstats.Price{}, false
		}
		out := runstats.Price{Input: tp.Input, Output: tp.Output, CachedInput: tp.Input}
		if tp.CachedInput != nil {
			out.CachedInput = *tp.CachedInput
		}
		return out, true
	}
}

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
