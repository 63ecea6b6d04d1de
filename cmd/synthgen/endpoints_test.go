package main

import (
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator"
)

// TestProgressNamesEndpoints: with several endpoints the line and the bar
// say how many are up and name a replica that is away (password masked,
// as the snapshot holds it); with one endpoint nothing changes.
func TestProgressNamesEndpoints(t *testing.T) {
	stats, clk := rampStats()
	snap := stats.Snapshot()
	one := formatLine(snap, nil, nil)
	if strings.Contains(one, "eps") {
		t.Errorf("one endpoint: the line speaks of endpoints: %q", one)
	}
	snap.Endpoints = []generator.EndpointSnapshot{
		{URL: "http://a:8000/v1", State: generator.EndpointUp},
		{URL: "http://b:8000/v1", State: generator.EndpointUp},
		{URL: "http://u:xxxxx@c:8000/v1", State: generator.EndpointUp},
	}
	if got := formatLine(snap, nil, nil); !strings.HasSuffix(got, " | eps 3/3 up") {
		t.Errorf("three up: line %q, want it to end in \" | eps 3/3 up\"", got)
	}
	snap.Endpoints[2].State = generator.EndpointProbing
	snap.Endpoints[2].DownSince = clk.now().Add(-12 * time.Second)
	want := "eps 2/3 up, down: http://u:xxxxx@c:8000/v1 12s"
	if got := formatLine(snap, nil, nil); !strings.HasSuffix(got, " | "+want) {
		t.Errorf("one down: line %q, want it to end in %q", got, want)
	}
	if got := barLine(snap, nil, nil, 160); !strings.Contains(got, want) {
		t.Errorf("one down, wide bar %q: want %q in it", got, want)
	}
	// Narrow: the short form, before the less important fields.
	if got := barLine(snap, nil, nil, 60); !strings.Contains(got, "eps 2/3 up") {
		t.Errorf("one down, narrow bar %q: want \"eps 2/3 up\" in it", got)
	}
}

// TestSelfMetricsPerEndpoint: with several endpoints --metrics-addr serves
// each one's series under the label endpoint (its URL, password masked);
// with one, none.
func TestSelfMetricsPerEndpoint(t *testing.T) {
	stats := generator.NewStats(nil)
	stats.SetEndpoints([]string{generator.RedactURL("http://a:8000/v1"), generator.RedactURL("http://u:hunter2@b:8000/v1")})
	m, err := startSelfMetrics("127.0.0.1:0", stats)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fams := scrapeSelf(t, m.URL())
	for _, ep := range []string{"http://a:8000/v1", "http://u:xxxxx@b:8000/v1"} {
		if v, ok := metricValue(fams, "synthgen_endpoint_up", "endpoint="+ep, "state=up"); !ok || v != 1 {
			t.Errorf("synthgen_endpoint_up{endpoint=%q,state=up} = %v (present %v), want 1", ep, v, ok)
		}
		for _, name := range []string{"synthgen_endpoint_requests_in_flight", "synthgen_endpoint_requests_total", "synthgen_endpoint_failures_total",
			"synthgen_endpoint_answers_total", "synthgen_endpoint_completion_tokens_total", "synthgen_endpoint_requests_per_second", "synthgen_endpoint_tokens_per_second"} {
			if _, ok := metricValue(fams, name, "endpoint="+ep); !ok {
				t.Errorf("%s{endpoint=%q} missing", name, ep)
			}
		}
	}
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if strings.Contains(l.GetValue(), "hunter2") {
					t.Errorf("%s carries the password in label %s", name, l.GetName())
				}
			}
		}
	}

	single := generator.NewStats(nil)
	single.SetEndpoints([]string{"http://a:8000/v1"})
	m1, err := startSelfMetrics("127.0.0.1:0", single)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	if _, ok := scrapeSelf(t, m1.URL())["synthgen_endpoint_up"]; ok {
		t.Error("one endpoint: per-endpoint series served")
	}
}
