package runstats

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes a Stats to Prometheus (synthgen run --metrics-addr),
// read at scrape time: each scrape takes one Snapshot, so there is no
// second set of counters to keep in step. Every counter it reports is
// monotonic within the process, as Prometheus requires: the client's
// credited token count is not (a retried attempt takes its streamed tokens
// back), so it is split into the completed answers' tokens (a counter) and
// the streamed tokens of the answers still running (a gauge).
type Collector struct {
	stats *Stats

	done, failed, retries, inFlight          *prometheus.Desc
	completionTokens, runningTokens, prompt  *prometheus.Desc
	planned, alreadyDone, alreadyFailed, eta *prometheus.Desc
	cost, costBilled, costProjected          *prometheus.Desc // with endpoint.price only
	// Per endpoint, label endpoint (its URL, password masked), with
	// several replicas only.
	epUp, epInFlight, epRequests, epFailures, epAnswers, epTokens, epReqRate, epTokRate *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector exposes stats.
func NewCollector(stats *Stats) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{
		stats:    stats,
		done:     d("synthgen_requests_done_total", "Requests answered and recorded by this process."),
		failed:   d("synthgen_requests_failed_total", "Requests that gave up for good in this process (an error record), by cause.", "cause"),
		retries:  d("synthgen_retries_total", "Attempts retried (a request retried twice counts 2), by cause.", "cause"),
		inFlight: d("synthgen_requests_in_flight", "Requests holding a concurrency slot now."),
		completionTokens: d("synthgen_completion_tokens_total",
			"Completion tokens of the answered requests (the server's usage figures; streamed deltas where it sends none). "+
				"Add synthgen_completion_tokens_in_flight for the tokens already streamed by the requests still running."),
		runningTokens: d("synthgen_completion_tokens_in_flight",
			"Streamed deltas of the requests still running, not yet in synthgen_completion_tokens_total."),
		prompt:      d("synthgen_prompt_tokens_total", "Prompt tokens of the answered requests."),
		planned:     d("synthgen_requests_planned", "Requests this process will make in all (keys done before it started are left out)."),
		alreadyDone: d("synthgen_requests_already_done", "Keys of the selection found done on disk, from earlier runs."),
		alreadyFailed: d("synthgen_requests_already_failed",
			"Keys of the selection that failed for good in earlier runs and are not asked again (no --retry-errors): not done."),
		eta: d("synthgen_eta_seconds", "Estimated seconds to the end of the run, from tokens; absent while unknown."),

		cost: d("synthgen_cost_usd_total", "USD the answered requests cost at endpoint.price, from their usage; absent without a price."),
		costBilled: d("synthgen_cost_billed_usd_total",
			"USD every answer the server sent cost at endpoint.price, those thrown away (retried, refused, of a key that failed) too; absent without a price."),
		costProjected: d("synthgen_cost_projected_usd",
			"USD the run is projected to cost: synthgen_cost_usd_total plus the mean answer's cost for each request to come; absent without a price or an answer."),

		epUp:       d("synthgen_endpoint_up", "1 while the endpoint takes requests, 0 while its gate is closed (away, probed until it answers), by endpoint and state (up, down, probing).", "endpoint", "state"),
		epInFlight: d("synthgen_endpoint_requests_in_flight", "Requests sent to the endpoint and not yet ended.", "endpoint"),
		epRequests: d("synthgen_endpoint_requests_total", "Attempts the endpoint answered (an answer, or an HTTP status below 500).", "endpoint"),
		epFailures: d("synthgen_endpoint_failures_total", "Attempts that failed on the endpoint, any cause (its outages included).", "endpoint"),
		epAnswers:  d("synthgen_endpoint_answers_total", "Answers the endpoint completed.", "endpoint"),
		epTokens:   d("synthgen_endpoint_completion_tokens_total", "Completion tokens of the answers the endpoint completed.", "endpoint"),
		epReqRate:  d("synthgen_endpoint_requests_per_second", "Answers per second from the endpoint over the last 10 s.", "endpoint"),
		epTokRate:  d("synthgen_endpoint_tokens_per_second", "Completion tokens per second from the endpoint over the last 10 s (credited when an answer completes).", "endpoint"),
	}
}

// Describe sends every descriptor the collector can emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.done, c.failed, c.retries, c.inFlight,
		c.completionTokens, c.runningTokens, c.prompt, c.planned, c.alreadyDone, c.alreadyFailed, c.eta, c.cost, c.costBilled, c.costProjected,
		c.epUp, c.epInFlight, c.epRequests, c.epFailures, c.epAnswers, c.epTokens, c.epReqRate, c.epTokRate} {
		ch <- d
	}
}

// Collect takes one Snapshot and reports it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats.Snapshot()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.done, float64(s.Done))
	for cause, n := range s.ErrorsByCause {
		counter(c.failed, float64(n), cause)
	}
	for cause, n := range s.RetriesByCause {
		counter(c.retries, float64(n), cause)
	}
	gauge(c.inFlight, float64(s.InFlight))
	counter(c.completionTokens, float64(s.CompletionTokens-s.RunningTokens))
	gauge(c.runningTokens, float64(s.RunningTokens))
	counter(c.prompt, float64(s.PromptTokens))
	gauge(c.planned, float64(s.Total))
	gauge(c.alreadyDone, float64(s.AlreadyDone))
	gauge(c.alreadyFailed, float64(s.AlreadyFailed))
	if s.ETAKnown {
		if v := s.ETA.Seconds(); !math.IsInf(v, 0) && !math.IsNaN(v) {
			gauge(c.eta, v)
		}
	}
	if s.Priced {
		counter(c.cost, s.Cost)
		counter(c.costBilled, s.Billed)
		if s.Done > 0 {
			gauge(c.costProjected, s.CostProjected)
		}
	}
	if len(s.Endpoints) < 2 {
		return // one endpoint's figures are the run's
	}
	for _, e := range s.Endpoints {
		labeled := func(d *prometheus.Desc, t prometheus.ValueType, v float64, more ...string) {
			ch <- prometheus.MustNewConstMetric(d, t, v, append([]string{e.URL}, more...)...)
		}
		up := 0.0
		if e.State == EndpointUp {
			up = 1
		}
		labeled(c.epUp, prometheus.GaugeValue, up, e.State)
		labeled(c.epInFlight, prometheus.GaugeValue, float64(e.InFlight))
		labeled(c.epRequests, prometheus.CounterValue, float64(e.Requests))
		labeled(c.epFailures, prometheus.CounterValue, float64(e.Failures))
		labeled(c.epAnswers, prometheus.CounterValue, float64(e.Completed))
		labeled(c.epTokens, prometheus.CounterValue, float64(e.CompletionTokens))
		labeled(c.epReqRate, prometheus.GaugeValue, e.Last10s.ReqPerSec)
		labeled(c.epTokRate, prometheus.GaugeValue, e.Last10s.TokPerSec)
	}
}
