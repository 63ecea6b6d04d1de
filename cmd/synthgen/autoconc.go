package main

// concurrency: auto in a run: its metrics sources from the config, and its
// figures on the progress line, the bar and --metrics-addr. The loop that
// steers the limit is autoconc.Loop's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// autoInterval is how often concurrency: auto looks at the server: every
// autoconc.DefaultInterval, or progress.interval when shorter.
func autoInterval(progress time.Duration) time.Duration {
	if progress <= 0 {
		return autoconc.DefaultInterval
	}
	return min(progress, autoconc.DefaultInterval)
}

// startAuto starts concurrency: auto's loop for r, once the servers'
// metrics are found usable; the returned func stops it and waits. Under a
// fixed concurrency it does nothing.
func (rs *runSession) startAuto(r *generator.Runner) (stop func(), err error) {
	if r.Auto() == nil {
		return func() {}, nil
	}
	scrapes := serverScrapers(rs.cfg)
	urls, err := metricsURLs(rs.cfg)
	if err != nil || len(scrapes) == 0 || len(scrapes) != len(urls) {
		return nil, usageError(fmt.Errorf("concurrency: auto needs the server's /metrics, and endpoint.base_url %s gives no URL for them",
			redactedURLs(rs.cfg.Endpoint.BaseURLs())),
			"set endpoint.metrics_url to the server's /metrics, or concurrency to a number (e.g. 64)")
	}
	eps := make([]autoconc.Endpoint, len(urls))
	for i, u := range urls {
		eps[i] = autoconc.Endpoint{URL: wire.RedactURL(u), Scrape: scrapes[i]}
	}
	log := io.Writer(rs.stderr)
	if rs.rf.quiet {
		log = io.Discard
	}
	loop, err := autoconc.Prepare(rs.sd.ctx, eps, autoconc.LoopOptions{
		Ceiling: rs.cfg.Concurrency,
		Every:   autoInterval(rs.cfg.Progress.Interval),
		Target:  r,
		InFlight: func() (int, []int) {
			snap := rs.stats.Snapshot()
			each := make([]int, len(snap.Endpoints))
			for i, ep := range snap.Endpoints {
				each[i] = int(ep.InFlight)
			}
			return int(snap.InFlight), each
		},
		SetEndpointLimit: rs.stats.SetEndpointLimit,
		Log:              log,
		Warn:             rs.stderr,
	})
	var refused *autoconc.RefusedError
	if errors.As(err, &refused) {
		return nil, usageError(refused.Err, refused.Hint)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(rs.sd.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { loop.Run(ctx) })
	return func() { cancel(); wg.Wait() }, nil
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

// autoText is the plain line's field: " | concurrency 98 (back off: KV cache 99% full)".
func autoText(rec *autoconc.Record) string {
	return fmt.Sprintf(" | concurrency %d (%s)", rec.Limit, rec.Reason)
}

// autoBar is the bar's short field: "limit 98 back off".
func autoBar(rec *autoconc.Record) string {
	verb, _, _ := strings.Cut(rec.Reason, ":")
	return fmt.Sprintf("limit %d %s", rec.Limit, verb)
}

// refuseRun ends an opened run that cannot start (concurrency: auto
// without metrics): the directory is closed as found, and status.json and
// report.json say why.
func (rs *runSession) refuseRun(r *generator.Runner, err error) error {
	r.SetOutcome(outcomeWord(err))
	if cerr := r.Close(); cerr != nil {
		fmt.Fprintf(rs.stderr, "warning: %v\n", cerr)
	}
	final := runstats.NewProgressRecord(rs.stats.Snapshot(), nil)
	if ferr := r.Finish(final, runOutcome(err, runstats.Summary{})); ferr != nil {
		fmt.Fprintf(rs.stderr, "warning: %v\n", ferr)
	}
	return err
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
