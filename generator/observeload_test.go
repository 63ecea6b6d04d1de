package generator

import (
	"context"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// TestObserveLoadTakesFreshSamples: a scrape this call made tells the
// engine its server answered; a sample handed out again (older than the
// call) tells nothing, so a stale idle count never cuts a request.
func TestObserveLoadTakesFreshSamples(t *testing.T) {
	var smp promscrape.Sample
	scrape := func(context.Context) (promscrape.Sample, error) { return smp, nil }
	seen := 0
	f := observeLoad(scrape, wire.New(wire.Options{BaseURL: "http://127.0.0.1:1/v1"}), func() { seen++ })
	smp = promscrape.Sample{At: time.Now().Add(-time.Minute), HasRunning: true, HasWaiting: true}
	if _, err := f(context.Background()); err != nil || seen != 0 {
		t.Fatalf("a stale sample: seen %d, err %v; want not seen", seen, err)
	}
	smp.At = time.Now().Add(time.Second)
	if _, err := f(context.Background()); err != nil || seen != 1 {
		t.Fatalf("a fresh sample: seen %d, err %v; want seen once", seen, err)
	}
}
