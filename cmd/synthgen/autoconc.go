package main

// concurrency: auto in a run: how often it looks, and its figures on the
// progress line, the bar and --metrics-addr. The loop that steers the limit
// is autoconc.Loop's, which the Runner starts (autoSetup gives it the
// metrics sources).

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/generator/autoconc"
)

// autoInterval is how often concurrency: auto looks at the server: every
// autoconc.DefaultInterval, or progress.interval when shorter.
func autoInterval(progress time.Duration) time.Duration {
	if progress <= 0 {
		return autoconc.DefaultInterval
	}
	return min(progress, autoconc.DefaultInterval)
}

// autoRecordOf is what the reporter shows of r's concurrency: auto; nil
// under a fixed concurrency.
func autoRecordOf(r *generator.Runner) func() *autoconc.Record {
	a := r.Auto()
	if a == nil {
		return nil
	}
	return a.Record
}

// registerAuto adds concurrency: auto's gauges to synthgen's own metrics.
func (m *selfMetricsServer) registerAuto(a *autoconc.State) {
	if m == nil || a == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "synthgen_concurrency_limit",
			Help: "Requests allowed in flight now (concurrency: auto moves it).",
		}, func() float64 { return float64(a.Record().Limit) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "synthgen_concurrency_moves_total",
			Help: "Times concurrency: auto moved the limit.",
		}, func() float64 { return float64(a.Record().Moves) }),
	)
}
