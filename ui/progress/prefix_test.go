package progress

import (
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// The server's prefix-cache hit rate is on its line, beside the client's
// own estimate over every replica when it placed answers by prefix.
func TestLinePrefixHits(t *testing.T) {
	clk := &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	stats := runstats.NewStats(clk.now)
	stats.SetEndpoints([]string{"http://a/v1", "http://b/v1"})
	eps := stats.EndpointLedgers(2)
	server := &promscrape.Rates{GenTokPerSec: 100, Running: 1, HasPrefix: true, PrefixHitRate: 0.812, Window: 10 * time.Second}
	if got := Line(stats.Snapshot(), server, nil); !strings.HasSuffix(got, " | server 100 tok/s running 1 waiting 0 prefix hits 81%") {
		t.Errorf("before any placed answer: %q", got)
	}
	eps[0].AddPlaced(1000, 900)
	eps[1].AddPlaced(3000, 2100)
	if got := Line(stats.Snapshot(), server, nil); !strings.HasSuffix(got, " prefix hits 81% (client est. 75%)") {
		t.Errorf("with 3000 of 4000 placed where held: %q", got)
	}
}

// Each replica's hit rate and preemptions, in order, "-" where one has
// none; nothing with one endpoint or with neither figure.
func TestReplicasText(t *testing.T) {
	a := &promscrape.Rates{HasPrefix: true, PrefixHitRate: 0.81, HasPreemptions: true, Preemptions: 0}
	b := &promscrape.Rates{HasPreemptions: true, Preemptions: 2}
	if got, want := ReplicasText([]*promscrape.Rates{a, b, nil}), " | replicas hits 81/-/-% preemptions 0/2/-"; got != want {
		t.Errorf("ReplicasText = %q, want %q", got, want)
	}
	if got := ReplicasText([]*promscrape.Rates{a}); got != "" {
		t.Errorf("one endpoint: %q", got)
	}
	if got := ReplicasText([]*promscrape.Rates{{}, nil}); got != "" {
		t.Errorf("no figures: %q", got)
	}
}
