package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/synthgen/synthgen/generator/runstats"
)

// scrapeSelf fetches url over loopback and parses it with the exposition
// format parser a Prometheus server would use.
func scrapeSelf(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// metricValue returns the value of the series of name whose labels are
// labels ("k=v" pairs), and whether it exists.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		if len(have) != len(labels) {
			continue
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func startSelfMetricsT(t *testing.T, stats *runstats.Stats) *selfMetricsServer {
	t.Helper()
	m, err := startSelfMetrics("127.0.0.1:0", stats, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// The endpoint shows what Stats holds at scrape time, with the types a
// Prometheus server expects, and its counters never go down.
func TestSelfMetricsValues(t *testing.T) {
	// The test's clock: the collector's scrape reads it from its own
	// goroutine, hence the atomic.
	var clk atomic.Int64
	clk.Store(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	stats := runstats.NewStats(func() time.Time { return time.Unix(0, clk.Load()).UTC() })
	stats.SetTotal(10)
	stats.AddAlreadyDone(2)

	a := stats.Begin()
	a.Delta(50)
	clk.Add(int64(2 * time.Second))
	a.Done(runstats.Outcome{UsageKnown: true, CompletionTokens: 60, PromptTokens: 20, Deltas: 50, FinishReason: "stop"})

	b := stats.Begin()
	b.Delta(10)
	b.Retry("http_429")
	b.Delta(5)
	b.Retry("http_429")
	b.Retry("stream_cut")
	b.Fail("timeout")

	c := stats.Begin()
	c.Delta(7)
	clk.Add(int64(3 * time.Second))

	m := startSelfMetricsT(t, stats)
	fams := scrapeSelf(t, m.URL())
	want := stats.Snapshot() // the clock is frozen: the same figures the scrape saw
	if !want.ETAKnown {
		t.Fatal("the fed Stats has no ETA; the test needs one")
	}

	tests := []struct {
		name   string
		labels []string
		typ    dto.MetricType
		want   float64
	}{
		{"synthgen_requests_done_total", nil, dto.MetricType_COUNTER, 1},
		{"synthgen_requests_failed_total", []string{"cause=timeout"}, dto.MetricType_COUNTER, 1},
		{"synthgen_retries_total", []string{"cause=http_429"}, dto.MetricType_COUNTER, 2},
		{"synthgen_retries_total", []string{"cause=stream_cut"}, dto.MetricType_COUNTER, 1},
		{"synthgen_requests_in_flight", nil, dto.MetricType_GAUGE, 1},
		{"synthgen_completion_tokens_total", nil, dto.MetricType_COUNTER, 60}, // usage, not the 50 deltas
		{"synthgen_completion_tokens_in_flight", nil, dto.MetricType_GAUGE, 7},
		{"synthgen_prompt_tokens_total", nil, dto.MetricType_COUNTER, 20},
		{"synthgen_requests_planned", nil, dto.MetricType_GAUGE, 8},
		{"synthgen_requests_already_done", nil, dto.MetricType_GAUGE, 2},
		{"synthgen_eta_seconds", nil, dto.MetricType_GAUGE, want.ETA.Seconds()},
	}
	for _, tc := range tests {
		t.Run(tc.name+strings.Join(tc.labels, ","), func(t *testing.T) {
			if got := fams[tc.name].GetType(); got != tc.typ {
				t.Errorf("type = %v, want %v", got, tc.typ)
			}
			got, ok := metricValue(fams, tc.name, tc.labels...)
			if !ok {
				t.Fatalf("no series %s%v", tc.name, tc.labels)
			}
			if math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("= %v, want %v", got, tc.want)
			}
		})
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "vllm") || strings.HasPrefix(name, "promhttp_") {
			t.Errorf("unexpected %s: the registry is not synthgen's own", name)
		}
	}

	// A retry takes the running request's streamed tokens back: the gauge
	// drops, the counter does not.
	c.Retry("http_500")
	fams = scrapeSelf(t, m.URL())
	if v, _ := metricValue(fams, "synthgen_completion_tokens_total"); v != 60 {
		t.Errorf("completion_tokens_total after a retry = %v, want 60", v)
	}
	if v, _ := metricValue(fams, "synthgen_completion_tokens_in_flight"); v != 0 {
		t.Errorf("completion_tokens_in_flight after a retry = %v, want 0", v)
	}
}

// Before anything is known there is no ETA series rather than a made-up one.
func TestSelfMetricsNoETAYet(t *testing.T) {
	stats := runstats.NewStats(nil)
	stats.SetTotal(5)
	m := startSelfMetricsT(t, stats)
	fams := scrapeSelf(t, m.URL())
	if v, ok := metricValue(fams, "synthgen_eta_seconds"); ok {
		t.Errorf("eta = %v before any token, want no series", v)
	}
	if v, ok := metricValue(fams, "synthgen_requests_planned"); !ok || v != 5 {
		t.Errorf("planned = %v, %v; want 5", v, ok)
	}
}

// With endpoint.price the run's cost is a counter and its projection a
// gauge; without one neither series exists (TestSelfMetricsNoETAYet's
// Stats has none).
func TestSelfMetricsCost(t *testing.T) {
	stats := runstats.NewStats(nil)
	stats.SetTotal(4)
	// A price of the prompt alone: each answer to come costs the mean's.
	stats.SetPrice(runstats.Price{Input: 2.5e4})
	stats.Begin().Done(runstats.Outcome{UsageKnown: true, PromptTokens: 10, CompletionTokens: 5, Cost: 0.25})
	fams := scrapeSelf(t, startSelfMetricsT(t, stats).URL())
	if v, ok := metricValue(fams, "synthgen_cost_usd_total"); !ok || v != 0.25 || fams["synthgen_cost_usd_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("cost = %v, %v; want a counter at 0.25", v, ok)
	}
	if v, ok := metricValue(fams, "synthgen_cost_projected_usd"); !ok || v != 1 {
		t.Errorf("cost projected = %v, %v; want 1 (3 to come at 0.25)", v, ok)
	}

	plain := runstats.NewStats(nil)
	plain.Begin().Done(runstats.Outcome{UsageKnown: true, CompletionTokens: 5})
	fams = scrapeSelf(t, startSelfMetricsT(t, plain).URL())
	for _, name := range []string{"synthgen_cost_usd_total", "synthgen_cost_projected_usd"} {
		if _, ok := metricValue(fams, name); ok {
			t.Errorf("%s without a price", name)
		}
	}
}

func TestSelfMetricsAddress(t *testing.T) {
	stats := runstats.NewStats(nil)
	m := startSelfMetricsT(t, stats)
	addr := strings.TrimSuffix(strings.TrimPrefix(m.URL(), "http://"), "/metrics")

	t.Run("taken", func(t *testing.T) {
		_, err := startSelfMetrics(addr, stats, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
			t.Errorf("err = %v, want one naming --metrics-addr", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, err := startSelfMetrics("127.0.0.1:notaport", stats, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
			t.Errorf("err = %v, want one naming --metrics-addr", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Timeout: time.Second}
		if resp, err := client.Get(m.URL()); err == nil {
			resp.Body.Close()
			t.Errorf("GET after Close: %s, want the connection refused", resp.Status)
		}
	})
}

func BenchmarkSelfMetricsCollect(b *testing.B) {
	stats := runstats.NewStats(nil)
	stats.SetTotal(25000)
	for i := range 2000 {
		tr := stats.Begin()
		tr.Delta(100 + i%500)
		if i%10 != 0 {
			tr.Done(runstats.Outcome{UsageKnown: true, CompletionTokens: 100 + i%700, PromptTokens: 50})
		}
	}
	reg := newSelfRegistry(stats)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(fmt.Errorf("gather: %w", err))
		}
	}
}

// TestSelfMetricsEveryInterfaceWarned: an address with no host binds every
// interface, which a person should know; a loopback one says nothing.
func TestSelfMetricsEveryInterfaceWarned(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{{":0", true}, {"0.0.0.0:0", true}, {"127.0.0.1:0", false}, {"[::1]:0", false}} {
		var w strings.Builder
		m, err := startSelfMetrics(tc.addr, runstats.NewStats(nil), &w)
		if err != nil {
			if strings.Contains(tc.addr, "::1") {
				continue // no IPv6 loopback here
			}
			t.Fatal(err)
		}
		m.Close()
		if got := strings.Contains(w.String(), "listens on every interface"); got != tc.warn {
			t.Errorf("%s: warned %v (%q), want %v", tc.addr, got, w.String(), tc.warn)
		}
	}
}
