// Package promscrape reads an inference server's own Prometheus /metrics
// (vLLM's, SGLang's or llama.cpp's names, kind.go) so synthgen can show the
// server's view of throughput next to the client's: generated tokens per
// second, requests running and waiting, KV-cache usage, preemptions and
// speculative-decoding acceptance, each where the server reports it.
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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one scrape: every figure summed over all its label sets
// (several engines under data parallelism, several model_name values),
// except the gauges of a share (KV-cache usage, SGLang's speculative
// decoding), which are the mean over engines: each engine has its own
// cache, and a sum of fractions would exceed 1. It holds what the server
// reports under its kind's names (kind.go); a figure its kind or version
// lacks is 0 with its Has* false.
type Sample struct {
	At time.Time

	// Kind is the server the metric names are of; KindUnknown when the
	// text holds none of the kinds' names.
	Kind Kind

	GenerationTokens float64 // counter
	PromptTokens     float64 // counter
	Running          float64 // gauge
	Waiting          float64 // gauge
	HasGeneration    bool
	HasPrompt        bool
	HasRunning       bool
	HasWaiting       bool
	KVCacheUsage     float64 // gauge, 0..1
	HasKV            bool
	Preemptions      float64 // counter
	HasPreemptions   bool    // the server exposes the counter (llama.cpp, for one, does not)

	SpecDrafts      float64 // counter
	SpecDraftTokens float64 // counter
	SpecAccepted    float64 // counter
	HasSpec         bool

	// SGLang's speculative decoding as it reports it: the acceptance rate
	// and the mean acceptance length over its last batches (gauges), set
	// when the length is above 0 (speculative decoding on).
	SpecAcceptRate   float64
	SpecAcceptLength float64
	HasSpecGauges    bool

	// The prefix cache: vLLM's counters of prompt tokens looked up and
	// found (HasPrefix), or SGLang's hit rate over its last batches
	// (HasPrefixRate).
	PrefixQueries float64
	PrefixHits    float64
	HasPrefix     bool
	PrefixRate    float64
	HasPrefixRate bool
	// PrefixUntrue says why a prefix-cache figure the server reported
	// cannot be true (a rate outside 0..1); it is then left out.
	PrefixUntrue string

	// Found holds the metric names of the kind's (kind.go, the `_total`
	// form) that the text contained.
	Found map[string]bool
}

// Usable reports whether the sample holds a server's view: the tokens it
// generated or the requests it runs.
func (s Sample) Usable() bool { return s.HasGeneration || s.HasRunning }

// Lacks names the figures of a server's view that the text did not hold,
// in the order they are shown ("waiting", "KV-cache usage", "preemptions"):
// a kind (llama.cpp has no preemption counter) or a version (llama.cpp's
// KV gauge went away) that does not report them.
func (s Sample) Lacks() []string {
	var out []string
	for _, f := range []struct {
		has  bool
		name string
	}{
		{s.HasGeneration, "generated tokens"}, {s.HasPrompt, "prompt tokens"},
		{s.HasRunning, "running"}, {s.HasWaiting, "waiting"},
		{s.HasKV, "KV-cache usage"}, {s.HasPreemptions, "preemptions"},
	} {
		if !f.has {
			out = append(out, f.name)
		}
	}
	return out
}

// sumFamilies is each family's series summed, with their count; a
// histogram or summary family is left out (nothing here reads one).
func sumFamilies(families map[string]*dto.MetricFamily) map[string]agg {
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
	return sums
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
	sums := sumFamilies(families)
	s := Sample{At: at, Kind: KindUnknown, Found: make(map[string]bool)}
	lookup := func(name string) (agg, bool) {
		if name == "" {
			return agg{}, false
		}
		if a, ok := sums[name]; ok {
			return a, true
		}
		if base, ok := strings.CutSuffix(name, "_total"); ok {
			a, ok := sums[base]
			return a, ok
		}
		return agg{}, false
	}
	names, ok := kindOfText(lookup)
	if !ok {
		return s, nil
	}
	s.Kind = names.kind
	read := func(name string, dst *float64) bool {
		a, ok := lookup(name)
		if ok {
			*dst = a.sum
			s.Found[name] = true
		}
		return ok
	}
	mean := func(name string, dst *float64) bool {
		a, ok := lookup(name)
		if ok {
			*dst = a.sum / float64(a.n)
			s.Found[name] = true
		}
		return ok
	}
	s.HasGeneration = read(names.generation, &s.GenerationTokens)
	s.HasPrompt = read(names.prompt, &s.PromptTokens)
	s.HasRunning = read(names.running, &s.Running)
	s.HasWaiting = read(names.waiting, &s.Waiting)
	s.HasPreemptions = read(names.preemptions, &s.Preemptions)
	for _, name := range names.kv {
		if mean(name, &s.KVCacheUsage) {
			s.HasKV = true
			break
		}
	}
	d := read(names.specDrafts, &s.SpecDrafts)
	t := read(names.specDraftTokens, &s.SpecDraftTokens)
	a := read(names.specAccepted, &s.SpecAccepted)
	s.HasSpec = d && t && a
	if mean(names.specLength, &s.SpecAcceptLength) && mean(names.specRate, &s.SpecAcceptRate) {
		s.HasSpecGauges = s.SpecAcceptLength > 0
	}
	q := read(names.prefixQueries, &s.PrefixQueries)
	h := read(names.prefixHits, &s.PrefixHits)
	s.HasPrefix = q && h
	// A rate outside 0..1 cannot be true: it is left out, as absent.
	if mean(names.prefixRate, &s.PrefixRate) {
		s.HasPrefixRate = s.PrefixRate >= 0 && s.PrefixRate <= 1
		if !s.HasPrefixRate {
			s.PrefixUntrue = fmt.Sprintf("%s is %g, not within 0..1", names.prefixRate, s.PrefixRate)
		}
	}
	return s, nil
}

// agg is one family's samples: their sum and how many.
type agg struct {
	sum float64
	n   int
}

// kindOfText is the names of the first kind (kindTable's order) the text
// holds any metric of.
func kindOfText(lookup func(string) (agg, bool)) (kindNames, bool) {
	for _, k := range kindTable {
		for _, name := range k.names() {
			if _, ok := lookup(name); ok {
				return k, true
			}
		}
	}
	return kindNames{}, false
}

// Rates is what happened between two samples.
type Rates struct {
	// Kind is the server's (the later sample's); with Sum, the kind all
	// the servers summed share, KindUnknown when they differ.
	Kind Kind

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
	// model). HasSpec is false when no draft ran in the window. From
	// SGLang, which reports both as gauges, they are the later sample's.
	AcceptanceRate       float64
	MeanAcceptanceLength float64
	HasSpec              bool

	// PrefixHitRate is the share of the prompt tokens looked up in the
	// prefix cache during the window that were found there (from vLLM's
	// counters, PrefixQueried and PrefixHit being those tokens), or SGLang's
	// own rate at the later sample. HasPrefix is false without either, when
	// nothing was looked up, and when the counters cannot be true (more
	// found than looked up): a figure that cannot be true is not shown.
	PrefixHitRate            float64
	PrefixQueried, PrefixHit float64
	HasPrefix                bool
	PrefixUntrue             string // why a figure the server reported was left out; "" when none was

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
		Kind:           b.Kind,
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
	if !r.HasSpec && b.HasSpecGauges {
		r.HasSpec = true
		r.AcceptanceRate, r.MeanAcceptanceLength = b.SpecAcceptRate, b.SpecAcceptLength
	}
	if a.HasPrefix && b.HasPrefix {
		q, h := delta(a.PrefixQueries, b.PrefixQueries), delta(a.PrefixHits, b.PrefixHits)
		switch rate := h / q; {
		case h > q || (q > 0 && !(rate >= 0 && rate <= 1)):
			// More found than looked up, or counts that are not numbers.
			r.PrefixUntrue = fmt.Sprintf("%g prompt tokens found in the prefix cache of %g looked up", h, q)
		case q > 0:
			r.HasPrefix, r.PrefixHitRate, r.PrefixQueried, r.PrefixHit = true, rate, q, h
		}
	} else if b.HasPrefixRate {
		r.HasPrefix, r.PrefixHitRate = true, b.PrefixRate
	}
	if b.PrefixUntrue != "" {
		r.PrefixUntrue = b.PrefixUntrue
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

// Tries is how often Persist tries a scrape that times out.
const Tries = 3

// Persist is scrape, tried again while it times out, Tries times in all
// (or until ctx ends): where one failed scrape ends what a person asked
// for (a run's start under concurrency: auto, a watch without --follow),
// a /metrics that is slow under load is given more than one chance. Any
// other failure is returned at once.
func Persist(ctx context.Context, scrape func(context.Context) (Sample, error)) (Sample, error) {
	for try := 1; ; try++ {
		s, err := scrape(ctx)
		var timeout interface{ Timeout() bool }
		timedOut := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout()
		if err == nil || !timedOut || try == Tries || ctx.Err() != nil {
			return s, err
		}
	}
}

// maxBody caps what a scrape reads: vLLM's /metrics is tens of kilobytes.
const maxBody = 16 << 20

// ErrNoServerMetrics is returned by Scrape when the endpoint answers but
// serves none of the metrics of a kind read (vLLM's, SGLang's,
// llama.cpp's): the tokens generated or the requests running.
var ErrNoServerMetrics = errors.New("no vLLM, SGLang or llama.cpp metrics (vllm:generation_tokens_total, sglang:num_running_reqs, llamacpp:tokens_predicted_total, ...)")

// StatusError is a /metrics that answered with a status other than 200:
// Message is what its body said, when it said something readable
// (llama-server started without --metrics answers 501 with the flag to
// add).
type StatusError struct {
	URL     string
	Status  int    // the HTTP status code
	Text    string // the status line's text, e.g. "501 Not Implemented"
	Message string // from the body; "" when it had none
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("scrape %s: %s", e.URL, e.Text)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// maxErrorBody caps what is read of an error answer's body.
const maxErrorBody = 4096

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
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // drained so the connection is reused
		return Sample{}, &StatusError{URL: s.url, Status: resp.StatusCode, Text: resp.Status, Message: BodyMessage(body)}
	}
	sample, err := Parse(io.LimitReader(resp.Body, maxBody), at)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	if !sample.Usable() {
		return Sample{}, fmt.Errorf("scrape %s: %w", s.url, ErrNoServerMetrics)
	}
	return sample, nil
}
