package main

// concurrency: auto's loop: every autoInterval it scrapes the server's
// /metrics, hands the sample and the number in flight to the endpoint's
// generator.AutoController, and sets the run's limit to what it answers
// (with several endpoints, the sum of their controllers'). Each move is
// one line on stderr ("concurrency 24 -> 36 at 4.1s: grow: ..."), and the
// limit and its last reason are in the progress line, status.json and
// --metrics-addr.
//
// A server without vLLM's metrics cannot steer the limit: the run is
// refused before its first request, naming the key, rather than run at a
// guess. A person who wrote auto wants the server to decide; running at
// the ceiling (512) could overload a server that cannot say so, and at a
// fixed low start would be slow without a word. Metrics that go away in
// the middle of a run (a restart) hold the limit where it is until they
// are back.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// autoInterval is how often concurrency: auto looks at the server: every
// generator.DefaultAutoInterval, or progress.interval when shorter.
func autoInterval(progress time.Duration) time.Duration {
	if progress <= 0 {
		return generator.DefaultAutoInterval
	}
	return min(progress, generator.DefaultAutoInterval)
}

// autoMetrics are the server metrics the controller cannot do without.
var autoMetrics = []string{promscrape.MetricGenerationTokens, promscrape.MetricWaiting}

// autoEndpoint is one metrics source and its controller.
type autoEndpoint struct {
	url    string // for messages, password masked
	scrape func(context.Context) (promscrape.Sample, error)
	ctrl   *generator.AutoController
	first  *promscrape.Sample // the scrape at start; nil when it failed
	failed bool               // the last scrape failed (said once)
}

// autoLoop steers one run's limit.
type autoLoop struct {
	r         *generator.Runner
	stats     *generator.Stats
	endpoints []*autoEndpoint
	every     time.Duration
	log       io.Writer // the move lines; io.Discard with --quiet
	started   time.Time
}

// startAuto starts concurrency: auto's loop for r, once the servers'
// metrics are found usable; the returned func stops it and waits. Under a
// fixed concurrency it does nothing. With several endpoints each has its
// own controller: the router prefers the one with the most headroom under
// its limit, and the run's limit is their sum.
func (rs *runSession) startAuto(r *generator.Runner) (stop func(), err error) {
	if r.Auto() == nil {
		return func() {}, nil
	}
	eps, err := rs.autoEndpoints()
	if err != nil {
		return nil, err
	}
	ceiling := rs.cfg.Concurrency
	loop := &autoLoop{r: r, stats: rs.stats, endpoints: eps,
		every: autoInterval(rs.cfg.Progress.Interval), log: rs.stderr, started: time.Now()}
	if rs.rf.quiet {
		loop.log = io.Discard
	}
	start := generator.AutoStart(ceiling)
	urls := make([]string, len(eps))
	for i, ep := range eps {
		ep.ctrl = generator.NewAutoController(generator.AutoOptions{Ceiling: ceiling, Start: start})
		if ep.first != nil {
			ep.ctrl.Observe(*ep.first, 0) // the baseline of the rates
		}
		urls[i] = ep.url
		if len(eps) > 1 {
			rs.stats.SetEndpointLimit(i, ep.ctrl.Limit())
		}
	}
	if len(eps) > 1 {
		r.SetLimit(min(len(eps)*start, ceiling), fmt.Sprintf("start: %d per endpoint", start), time.Now())
	}
	fmt.Fprintf(loop.log, "concurrency: auto, starting at %d, up to %d, from %s every %s\n", r.Limit(), ceiling, strings.Join(urls, ", "), loop.every)
	ctx, cancel := context.WithCancel(rs.sd.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { loop.run(ctx) })
	return func() { cancel(); wg.Wait() }, nil
}

// autoEndpoints are the run's metrics sources, each scraped once: one that
// answers without vLLM's metrics refuses the run, as does a run where none
// answers; one that does not answer while others do starts at the first
// limit, and its controller waits for its metrics.
func (rs *runSession) autoEndpoints() ([]*autoEndpoint, error) {
	scrapes := serverScrapers(rs.cfg)
	urls, err := metricsURLs(rs.cfg)
	if err != nil || len(scrapes) == 0 || len(scrapes) != len(urls) {
		return nil, usageError(fmt.Errorf("concurrency: auto needs the server's /metrics, and endpoint.base_url %s gives no URL for them",
			redactedURLs(rs.cfg.Endpoint.BaseURLs())),
			"set endpoint.metrics_url to the server's /metrics, or concurrency to a number (e.g. 64)")
	}
	eps := make([]*autoEndpoint, len(urls))
	var down []string
	for i, u := range urls {
		ep := &autoEndpoint{url: wire.RedactURL(u), scrape: scrapes[i]}
		eps[i] = ep
		first, err := ep.scrape(rs.sd.ctx)
		if err != nil {
			ep.failed = true
			down = append(down, fmt.Sprintf("%s (%v)", ep.url, err))
			continue
		}
		var missing []string
		for _, m := range autoMetrics {
			if !first.Found[m] {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			return nil, usageError(fmt.Errorf("concurrency: auto steers by the server's vLLM metrics at %s, which cannot be used: it has no %s (is this vLLM?)",
				ep.url, strings.Join(missing, " nor ")),
				"set concurrency to a number (e.g. 64), or endpoint.metrics_url to where the server serves vLLM's /metrics")
		}
		ep.first = &first
	}
	if len(down) == len(eps) {
		return nil, usageError(fmt.Errorf("concurrency: auto steers by the server's vLLM metrics, which cannot be read: %s", strings.Join(down, "; ")),
			"set concurrency to a number (e.g. 64), or endpoint.metrics_url to where the server serves vLLM's /metrics")
	}
	for _, d := range down {
		fmt.Fprintf(rs.stderr, "warning: concurrency: auto cannot read %s yet; that endpoint holds its first limit until it can\n", d)
	}
	return eps, nil
}

func (a *autoLoop) run(ctx context.Context) {
	t := time.NewTicker(a.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.step(ctx)
	}
}

// step looks at every endpoint once, sets each one's limit (with several)
// and the run's: their sum.
func (a *autoLoop) step(ctx context.Context) {
	snap := a.stats.Snapshot()
	several := len(a.endpoints) > 1 && len(snap.Endpoints) == len(a.endpoints)
	var reasons []string
	moved := false
	limit := 0
	for i, ep := range a.endpoints {
		s, err := ep.scrape(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !ep.failed {
				ep.failed = true
				fmt.Fprintf(a.log, "concurrency: auto cannot read %s (%v); holding at %d until it can\n", ep.url, err, ep.ctrl.Limit())
			}
		default:
			if ep.failed {
				ep.failed = false
				fmt.Fprintf(a.log, "concurrency: auto reads %s again\n", ep.url)
			}
			// One endpoint: all in flight are its own; with several, the
			// router's count for it.
			inFlight := int(snap.InFlight)
			if several {
				inFlight = int(snap.Endpoints[i].InFlight)
			}
			d := ep.ctrl.Observe(s, inFlight)
			if d.Moved {
				moved = true
				why := d.Reason
				if several {
					why = ep.url + ": " + why
					a.stats.SetEndpointLimit(i, ep.ctrl.Limit())
				}
				reasons = append(reasons, why)
			}
		}
		limit += ep.ctrl.Limit()
	}
	if !moved {
		return
	}
	from := a.r.Limit()
	why := strings.Join(reasons, "; ")
	to := a.r.SetLimit(limit, why, time.Now())
	fmt.Fprintf(a.log, "concurrency %d -> %d at %s: %s\n", from, to, time.Since(a.started).Round(100*time.Millisecond), why)
}

// autoRecordOf is what the reporter shows of r's concurrency: auto; nil
// under a fixed concurrency.
func autoRecordOf(r *generator.Runner) func() *generator.AutoRecord {
	a := r.Auto()
	if a == nil {
		return nil
	}
	return a.Record
}

// autoText is the plain line's field: " | concurrency 98 (back off: KV cache 99% full)".
func autoText(rec *generator.AutoRecord) string {
	return fmt.Sprintf(" | concurrency %d (%s)", rec.Limit, rec.Reason)
}

// autoBar is the bar's short field: "limit 98 back off".
func autoBar(rec *generator.AutoRecord) string {
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
	final := generator.NewProgressRecord(rs.stats.Snapshot(), nil)
	if ferr := r.Finish(final, runOutcome(err, generator.Summary{})); ferr != nil {
		fmt.Fprintf(rs.stderr, "warning: %v\n", ferr)
	}
	return err
}

// registerAuto adds concurrency: auto's gauges to synthgen's own metrics.
func (m *selfMetricsServer) registerAuto(a *generator.AutoState) {
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
