package generator

import (
	"time"

	"github.com/synthgen/synthgen/generator/autoconc"
)

// SetLimit sets how many requests may be in flight (1 up to the ceiling,
// Setup.Concurrency) and records why, for the progress line and
// status.json; it returns the limit in force. Under a fixed concurrency
// it changes nothing and returns it. Safe from any goroutine.
func (r *Runner) SetLimit(limit int, reason string, at time.Time) int {
	if r.auto == nil {
		return r.setup.Concurrency
	}
	limit = r.eng.SetLimit(limit)
	r.auto.Moved(limit, reason, at)
	return limit
}

// Limit is how many requests may be in flight now.
func (r *Runner) Limit() int { return r.eng.Limit() }

// Auto is concurrency: auto's state; nil under a fixed concurrency.
func (r *Runner) Auto() *autoconc.State { return r.auto }

// startLimit is the engine's first limit: the concurrency, or AutoStart.
func (r *Runner) startLimit() int {
	if r.setup.Auto {
		return autoconc.StartLimit(r.setup.Concurrency)
	}
	return r.setup.Concurrency
}
