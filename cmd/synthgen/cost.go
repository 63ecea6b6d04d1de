package main

import (
	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/runstats"
)

// priceOf is endpoint.price as the runner asks it, for the model the job
// resolved to, times factor (batch.price_factor in the batch mode, else
// 1); nil without a price. An unset cached_input is the input price: the
// server is taken to bill a cached token as any other.
func priceOf(p config.Price, factor float64) func(model string) (runstats.Price, bool) {
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
		out.Input, out.Output, out.CachedInput = out.Input*factor, out.Output*factor, out.CachedInput*factor
		return out, true
	}
}
