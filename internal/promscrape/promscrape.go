// Package promscrape reads an inference server's own Prometheus /metrics
// (vLLM's names) so synthgen can show the server's view of throughput next
// to the client's: generated tokens per second, requests running and
// waiting, KV-cache usage, preemptions and speculative-decoding acceptance.
//
// The text is parsed with the Prometheus exposition-format parser, never by
// matching lines: a counter's `_created` timestamp, a per-position
// breakdown or a histogram's buckets must not leak into the figures.
package promscrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The vLLM metric names read. Counters are looked up with and without their
// `_total` suffix: the Python client exposes `name_total`, other exporters
// the bare family name.
const (
	MetricGenerationTokens = "vllm:generation_tokens_total"
	MetricPromptTokens     = "vllm:prompt_tokens_total"
	MetricRunning          = "vllm:num_requests_running"
	MetricWaiting          = "vllm:num_requests_waiting"
	MetricKVCacheUsage     = "vllm:kv_cache_usage_perc"
	MetricGPUCacheUsage    = "vllm:gpu_cache_usage_perc" // before vLLM V1 renamed it
	MetricPreemptions      = "vllm:num_preemptions_total"
	MetricSpecDrafts       = "vllm:spec_decode_num_drafts_total"
	MetricSpecDraftTokens  = "vllm:spec_decode_num_draft_tokens_total"
	MetricSpecAccepted     = "vllm:spec_decode_num_accepted_tokens_total"
)

// Sample is one scrape: every figure summed over all its label sets
// (several engines under data parallelism, several model_name values),
// except KV-cache usage, which is the mean over engines: each engine has its
// own cache, and a sum of fractions would exceed 1.
type Sample struct {
	At time.Time

	GenerationTokens float64 // counter
	PromptTokens     float64 // counter
	Running          float64 // gauge
	Waiting          float64 // gauge
	KVCacheUsage     float64 // gauge, 0..1
	HasKV            bool
	Preemptions      float64 // counter
	HasPreemptions   bool    // the server exposes the counter (llama.cpp, for one, does not)

	SpecDrafts      float64 // counter
	SpecDraftTokens float64 // counter
	SpecAccepted    float64 // counter
	HasSpec         bool

	// Found holds the metric names above (the constants, `_total` form)
	// that the text contained.
	Found map[string]bool
}

// Parse reads Prometheus text exposition format. Families it does not know
// (histograms, summaries, info gauges, other servers' metrics) are skipped.
// A malformed text is an error naming the line.
func Parse(r io.Reader, at time.Time) (Sample, error) {
	// Metric names with ':' are valid under the legacy scheme, which is
	// what vLLM's Python client writes.
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Sample{}, fmt.Errorf("parse metrics: %w", err)
	}
	type agg struct {
		sum float64
		n   int
	}
	sums := make(map[string]agg, len(families))
	for name, mf := range families {
		var a agg
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				a.sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				a.sum += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				a.sum += m.GetUntyped().GetValue()
			default:
				continue // histogram or summary: nothing we read
			}
			a.n++
		}
		if a.n > 0 {
			sums[name] = a
		}
	}

	s := Sample{At: at, Found: make(map[string]bool)}
	lookup := func(name string) (agg, bool) {
		if a, ok := sums[name]; ok {
			return a, true
		}
		if base, ok := strings.CutSuffix(name, "_total"); ok {
			a, ok := sums[base]
			return a, ok
		}
		return agg{}, false
	}
	read := func(name string, dst *float64) bool {
		a, ok := lookup(name)
		if ok {
			*dst = a.sum
			s.Found[name] = true
		}
		return ok
	}
	read(MetricGenerationTokens, &s.GenerationTokens)
	read(MetricPromptTokens, &s.PromptTokens)
	read(MetricRunning, &s.Running)
	read(MetricWaiting, &s.Waiting)
	s.HasPreemptions = read(MetricPreemptions, &s.Preemptions)
	for _, name := range []string{MetricKVCacheUsage, MetricGPUCacheUsage} {
		if a, ok := lookup(name); ok {
			s.KVCacheUsage = a.sum / float64(a.n)
			s.HasKV = true
			s.Found[name] = true
			break
		}
	}
	d := read(MetricSpecDrafts, &s.SpecDrafts)
	t := read(MetricSpecDraftTokens, &s.SpecDraftTokens)
	a := read(MetricSpecAccepted, &s.SpecAccepted)
	s.HasSpec = d && t && a
	return s, nil
}

// Rates is what happened between two samples.
type Rates struct {
	GenTokPerSec    float64
	PromptTokPerSec float64
	Running         float64 // at the later sample
	Waiting         float64 // at the later sample
	KVCacheUsage    float64 // at the later sample, 0..1
	HasKV           bool
	Preemptions     float64 // preemptions during the window
	HasPreemptions  bool    // both samples had the counter

	// AcceptanceRate is accepted / draft tokens; MeanAcceptanceLength is
	// 1 + accepted / drafts (tokens produced per forward pass of the target
	// model). HasSpec is false when no draft ran in the window.
	AcceptanceRate       float64
	MeanAcceptanceLength float64
	HasSpec              bool

	Window time.Duration

	// Servers is how many servers' rates these are (1 for one server's,
	// the number summed for Sum's); Of, when set, is how many there are in
	// all: a view of replicas of which some did not answer says so.
	Servers, Of int
}

// Between returns the rates from a to b. A counter lower in b than in a was
// reset (the server restarted): its delta is b's value, the count since the
// restart.
func Between(a, b Sample) Rates {
	r := Rates{
		Servers:        1,
		Running:        b.Running,
		Waiting:        b.Waiting,
		KVCacheUsage:   b.KVCacheUsage,
		HasKV:          b.HasKV,
		Window:         b.At.Sub(a.At),
		Preemptions:    delta(a.Preemptions, b.Preemptions),
		HasPreemptions: a.HasPreemptions && b.HasPreemptions,
	}
	if secs := r.Window.Seconds(); secs > 0 {
		r.GenTokPerSec = delta(a.GenerationTokens, b.GenerationTokens) / secs
		r.PromptTokPerSec = delta(a.PromptTokens, b.PromptTokens) / secs
	}
	if a.HasSpec && b.HasSpec {
		drafts := delta(a.SpecDrafts, b.SpecDrafts)
		draftTok := delta(a.SpecDraftTokens, b.SpecDraftTokens)
		accepted := delta(a.SpecAccepted, b.SpecAccepted)
		if drafts > 0 && draftTok > 0 {
			r.HasSpec = true
			r.AcceptanceRate = accepted / draftTok
			r.MeanAcceptanceLength = 1 + accepted/drafts
		}
	}
	return r
}

func delta(a, b float64) float64 {
	if b < a {
		return b
	}
	return b - a
}

// MetricsURL derives the /metrics URL from what a user has at hand: the
// OpenAI base URL (http://host:8000/v1 → http://host:8000/metrics), the
// server root, or the /metrics URL itself (kept). A path prefix in front of
// /v1 (a proxy) is kept.
func MetricsURL(baseURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return "", fmt.Errorf("metrics url from %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("metrics url from %q: want http(s)://host:port, its /v1 base or its /metrics URL", baseURL)
	}
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	path := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(path, "/metrics") {
		path = strings.TrimSuffix(path, "/v1") + "/metrics"
	}
	u.Path = path
	return u.String(), nil
}

// DefaultTimeout bounds one scrape when the caller's context has no
// earlier deadline: a slow /metrics must not hold up a progress line.
const DefaultTimeout = 3 * time.Second

// maxBody caps what a scrape reads: vLLM's /metrics is tens of kilobytes.
const maxBody = 16 << 20

// ErrNoVLLMMetrics is returned by Scrape when the endpoint answers but
// serves none of the vLLM metrics.
var ErrNoVLLMMetrics = errors.New("no vLLM metrics (vllm:generation_tokens_total, vllm:num_requests_running)")

// Scraper fetches and parses one /metrics URL.
type Scraper struct {
	url    string
	client *http.Client
	now    func() time.Time
}

// NewScraper returns a scraper of url; a nil client means a default one.
func NewScraper(url string, client *http.Client) *Scraper {
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	return &Scraper{url: url, client: client, now: time.Now}
}

// URL is the scraped address.
func (s *Scraper) URL() string { return s.url }

// Scrape fetches the metrics once. A down or foreign endpoint is an error;
// callers show it once and carry on: the server's view is an extra, never a
// reason to stop a run.
func (s *Scraper) Scrape(ctx context.Context) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	// Ask for the plain text format, not OpenMetrics or protobuf.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	at := s.now()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // drained so the connection is reused
		return Sample{}, fmt.Errorf("scrape %s: %s", s.url, resp.Status)
	}
	sample, err := Parse(io.LimitReader(resp.Body, maxBody), at)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	if !sample.Found[MetricGenerationTokens] && !sample.Found[MetricRunning] {
		return Sample{}, fmt.Errorf("scrape %s: %w", s.url, ErrNoVLLMMetrics)
	}
	return sample, nil
}
