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
