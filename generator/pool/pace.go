package pool

import (
	"time"

	"github.com/synthgen/synthgen/generator/pool/pace"
)

// RateLimits are the limits an endpoint is held to where the server
// states none, per replica; 0: none (package pace paces to them).
type RateLimits = pace.Limits

// Signals are what an endpoint's answers said so far (pace.Signals).
type Signals = pace.Signals

// Signals are each endpoint's Signals in Options.Endpoints order; nil
// before Run. Safe from any goroutine. They are counted only with
// Options.Signals or where the endpoint is paced (zero otherwise).
func (e *Engine) Signals() []Signals {
	r := e.route.Load()
	if r == nil {
		return nil
	}
	out := make([]Signals, len(r.eps))
	for i, ep := range r.eps {
		out[i] = ep.pace.Signals()
	}
	return out
}

// newPacer is an endpoint's pacer under the configured limits, holding
// back after 429s that say nothing by the retry policy's backoff, and
// counting its Signals when signals (Options.Signals).
func newPacer(cfg RateLimits, retry RetryPolicy, signals bool) *pace.Pacer {
	return pace.New(cfg, pace.UnsaidHold(retry.InitialBackoff, retry.MaxBackoff), time.Now, signals)
}
