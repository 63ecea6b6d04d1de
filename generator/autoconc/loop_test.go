package autoconc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// target is a run's limit, as the Runner keeps it.
type target struct{ limit int }

func (t *target) Limit() int { return t.limit }
func (t *target) SetLimit(limit int, _ string, _ time.Time) int {
	t.limit = limit
	return limit
}

// TestLoopFeedsEachEndpointItsOwnInFlight: with two endpoints at limit 16,
// one with 16 in flight and the other with 2, the second's controller is
// told its own 2 ("limit not reached") and holds, while the first grows;
// the run's limit is their sum. Fed the run's 18, the second would grow
// too, and the router would send it work it cannot be shown to take.
func TestLoopFeedsEachEndpointItsOwnInFlight(t *testing.T) {
	servers := []*simServer{
		{kvFits: 1000, preemptAbove: 2000, batchScale: 400, clock: time.Unix(0, 0)},
		{kvFits: 1000, preemptAbove: 2000, batchScale: 400, clock: time.Unix(0, 0)},
	}
	tg := &target{limit: 16}
	var eps []Endpoint
	var ctrls []*Controller
	for i, s := range servers {
		eps = append(eps, Endpoint{URL: "http://replica-" + string(rune('a'+i)), Scrape: func(context.Context) (promscrape.Sample, error) {
			limit := 16
			if len(ctrls) > i {
				limit = ctrls[i].Limit()
			}
			smp := s.sample(limit, limit).Server
			smp.Found = map[string]bool{promscrape.MetricWaiting: true}
			return smp, nil
		}})
	}
	var log strings.Builder
	clock := time.Unix(0, 0)
	l, err := Prepare(context.Background(), eps, LoopOptions{
		Ceiling: 512, Target: tg,
		Now: func() time.Time { clock = clock.Add(time.Second); return clock },
		Client: func() ClientView {
			first := 16
			if len(ctrls) > 0 {
				first = ctrls[0].Limit()
			}
			return ClientView{InFlight: first + 2, Endpoints: []EndpointView{
				{InFlight: first, Tokens: int64(servers[0].gen)}, {InFlight: 2, Tokens: int64(servers[1].gen)}}}
		},
		Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range l.endpoints {
		ctrls = append(ctrls, ep.ctrl)
	}
	for range 10 {
		l.Step(context.Background())
	}
	// One more reading of the second, as Step makes it: what it decides.
	smp, _ := eps[1].Scrape(context.Background())
	if d := l.observe(1, l.endpoints[1], smp, l.o.Client(), l.o.Now()); d.Reason != "hold: limit not reached (2 in flight)" {
		t.Errorf("the endpoint with 2 of 16 in flight decided %+v, want the limit not reached", d)
	}
	if got := ctrls[1].Limit(); got != 16 {
		t.Errorf("the endpoint with 2 of 16 in flight moved to %d; it must hold (limit not reached)\n%s", got, log.String())
	}
	if got := ctrls[0].Limit(); got <= 16 {
		t.Errorf("the endpoint with its limit in flight stayed at %d; a server far from its knee must let it grow\n%s", got, log.String())
	}
	if want := ctrls[0].Limit() + ctrls[1].Limit(); tg.limit != want {
		t.Errorf("the run's limit is %d, want the endpoints' sum %d", tg.limit, want)
	}
}

// TestPrepareSteersByRepliesWithoutMetrics: an endpoint whose first
// scrape shows it serves nothing to steer by (no URL, a 404 or 501, no
// Prometheus text, none of the known metrics, no queue gauge) is steered
// by its answers, and Prepare says so once, naming the URL and why; one
// that cannot be read at all (the server away) refuses the run, with a
// hint.
func TestPrepareSteersByRepliesWithoutMetrics(t *testing.T) {
	const url = "http://api:8080/metrics"
	for _, tc := range []struct {
		name   string
		scrape func(context.Context) (promscrape.Sample, error)
		want   string // the steering said; "": refused
	}{
		{"no URL", nil, "no /metrics URL for " + url},
		{"404", fails(&promscrape.StatusError{URL: url, Status: 404, Text: "404 Not Found"}), "no /metrics at " + url + " (404 Not Found)"},
		{"501", fails(&promscrape.StatusError{URL: url, Status: 501, Text: "501 Not Implemented"}), "no /metrics at " + url + " (501 Not Implemented)"},
		{"html", func(context.Context) (promscrape.Sample, error) {
			return promscrape.Parse(strings.NewReader("<html><body>hi</body></html>\n"), time.Unix(1, 0))
		}, "no server metrics at " + url + " (not vLLM's Prometheus text)"},
		{"a proxy's metrics", fails(fmt.Errorf("scrape %s: %w", url, promscrape.ErrNoServerMetrics)), "no server metrics at " + url},
		{"no queue gauge", func(context.Context) (promscrape.Sample, error) {
			return promscrape.Sample{At: time.Unix(1, 0), Found: map[string]bool{promscrape.MetricGenerationTokens: true}}, nil
		}, "no " + promscrape.MetricWaiting + " at " + url},
		{"503", fails(&promscrape.StatusError{URL: url, Status: 503, Text: "503 Service Unavailable"}), ""},
		{"refused", fails(errors.New("dial tcp: connection refused")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			l, err := Prepare(context.Background(), []Endpoint{{URL: url, Scrape: tc.scrape}},
				LoopOptions{Ceiling: 64, Target: &target{limit: 16}, Client: func() ClientView { return ClientView{} }, Log: &log})
			if tc.want == "" {
				var refused *RefusedError
				if !errors.As(err, &refused) || !strings.Contains(err.Error(), url) || refused.Hint == "" {
					t.Fatalf("error %v: want a RefusedError naming the URL, with a hint", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want + ": steering by 429s and latency, ceiling 64"
			if !strings.HasPrefix(l.Steering(), tc.want) || !strings.HasSuffix(l.Steering(), ": steering by 429s and latency, ceiling 64") {
				t.Errorf("steering %q, want %q", l.Steering(), want)
			}
			if n := strings.Count(log.String(), "steering by 429s"); n != 1 {
				t.Errorf("said %d times:\n%s", n, log.String())
			}
			if !l.endpoints[0].ctrl.o.ByReplies {
				t.Error("the controller does not steer by replies")
			}
		})
	}
}

func fails(err error) func(context.Context) (promscrape.Sample, error) {
	return func(context.Context) (promscrape.Sample, error) { return promscrape.Sample{}, err }
}

// fakeRun is one endpoint's server and the client's counts of it, read
// one second apart: the loop's clock, its scrape and its client view.
type fakeRun struct {
	clock  time.Time
	sample func(n int) promscrape.Sample // the server at the n-th scrape
	n      int
	target *target
	tokens int64
}

func (f *fakeRun) options(log io.Writer) LoopOptions {
	return LoopOptions{
		Ceiling: 400, Target: f.target, Log: log,
		Now: func() time.Time { f.clock = f.clock.Add(time.Second); return f.clock },
		Client: func() ClientView {
			// 100 tokens a second for each request in flight: throughput
			// in proportion to the limit, far from any knee.
			f.tokens += 100 * int64(f.target.limit)
			return ClientView{InFlight: f.target.limit, Endpoints: []EndpointView{{InFlight: f.target.limit, Tokens: f.tokens}}}
		},
	}
}

func (f *fakeRun) endpoint() []Endpoint {
	return []Endpoint{{URL: "http://sim:8000/metrics", Scrape: func(context.Context) (promscrape.Sample, error) {
		f.n++
		return f.sample(f.n), nil
	}}}
}

// TestAutoStartsWithoutTheServersTokenCounter: llm-d-inference-sim has no
// vllm:generation_tokens_total until its first request ends, and then
// adds to it only as requests end. concurrency: auto starts all the same
// and grows on the client's own count, whatever that counter does.
func TestAutoStartsWithoutTheServersTokenCounter(t *testing.T) {
	f := &fakeRun{clock: time.Unix(0, 0), target: &target{limit: 16}}
	f.sample = func(n int) promscrape.Sample {
		s := promscrape.Sample{Running: float64(f.target.limit), Found: map[string]bool{
			promscrape.MetricWaiting: true, promscrape.MetricRunning: true, promscrape.MetricKVCacheUsage: true}}
		if n > 3 && n%3 == 0 {
			// A burst now and then, nothing in between.
			s.Found[promscrape.MetricGenerationTokens] = true
			s.GenerationTokens = float64(1000 * n)
		}
		return s
	}
	var log strings.Builder
	l, err := Prepare(context.Background(), f.endpoint(), f.options(&log))
	if err != nil {
		t.Fatalf("refused a server without the token counter: %v", err)
	}
	for range 12 {
		l.Step(context.Background())
	}
	if f.target.limit < 100 {
		t.Errorf("after 12 readings of a server far from its knee the limit is %d; want it grown past 100\n%s", f.target.limit, log.String())
	}
	if strings.Contains(log.String(), "at knee") {
		t.Errorf("the server counter's bursts read as a knee:\n%s", log.String())
	}
}

// TestLoopWarnsOnceOfAnImpossibleFigure: a KV cache usage of 45 (a server
// reporting percent) is said once, on the warnings and to OnWarning,
// naming the metric, its value and the endpoint, and never steers the
// limit down.
func TestLoopWarnsOnceOfAnImpossibleFigure(t *testing.T) {
	f := &fakeRun{clock: time.Unix(0, 0), target: &target{limit: 16}}
	f.sample = func(int) promscrape.Sample {
		return promscrape.Sample{Running: float64(f.target.limit), KVCacheUsage: 45, HasKV: true,
			Found: map[string]bool{promscrape.MetricWaiting: true, promscrape.MetricKVCacheUsage: true}}
	}
	var log, warn strings.Builder
	var told []string
	o := f.options(&log)
	o.Warn = &warn
	o.OnWarning = func(s string) { told = append(told, s) }
	l, err := Prepare(context.Background(), f.endpoint(), o)
	if err != nil {
		t.Fatal(err)
	}
	low := f.target.limit
	for range 8 {
		l.Step(context.Background())
		low = min(low, f.target.limit)
	}
	want := "warning: concurrency: auto ignores vllm:kv_cache_usage_perc = 45 from http://sim:8000/metrics: a usage is a fraction within 0..1 (a server reporting percent?); such values do not steer the limit (said once)\n"
	if warn.String() != want {
		t.Errorf("warnings:\n%s\nwant once:\n%s", warn.String(), want)
	}
	if len(told) != 1 || "warning: "+told[0]+"\n" != want {
		t.Errorf("OnWarning was told %q", told)
	}
	if low < 16 || f.target.limit <= 16 {
		t.Errorf("the limit went down to %d and ended at %d: the cache's 45 steered it\n%s", low, f.target.limit, log.String())
	}
}

// TestFirstScrapeTriedAgainWhileItTimesOut: the scrape that decides
// whether a run may steer by /metrics is tried up to promscrape.Tries times
// while it times out (a busy server's /metrics is slow), and once for any
// other error; a run refused after the tries names the timeout.
func TestFirstScrapeTriedAgainWhileItTimesOut(t *testing.T) {
	const url = "http://vllm:8000/metrics"
	timeout := fmt.Errorf("scrape %s: %w", url, context.DeadlineExceeded)
	usable := promscrape.Sample{At: time.Unix(1, 0), Found: map[string]bool{
		promscrape.MetricGenerationTokens: true, promscrape.MetricWaiting: true, promscrape.MetricRunning: true}}
	for _, tc := range []struct {
		name      string
		failures  int   // scrapes that fail before one answers
		err       error // how they fail
		wantTries int
		refused   bool
	}{
		{"slow twice", promscrape.Tries - 1, timeout, promscrape.Tries, false},
		{"slow always", 100, timeout, promscrape.Tries, true},
		{"refused", 100, errors.New("dial tcp: connection refused"), 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			scrape := func(context.Context) (promscrape.Sample, error) {
				if tries++; tries <= tc.failures {
					return promscrape.Sample{}, tc.err
				}
				return usable, nil
			}
			_, err := Prepare(context.Background(), []Endpoint{{URL: url, Scrape: scrape}},
				LoopOptions{Ceiling: 64, Target: &target{limit: 16}, Client: func() ClientView { return ClientView{} }})
			if tries != tc.wantTries {
				t.Errorf("scraped %d times, want %d", tries, tc.wantTries)
			}
			if tc.refused != (err != nil) || tc.refused && !strings.Contains(err.Error(), tc.err.Error()) {
				t.Errorf("error %v, want refused %v naming %q", err, tc.refused, tc.err)
			}
		})
	}
}
