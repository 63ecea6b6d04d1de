package runstats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

func vllmPrefixSample(at time.Time, queries, hits float64) *promscrape.Sample {
	return &promscrape.Sample{At: at, Kind: promscrape.KindVLLM, Running: 1, HasGeneration: true, HasPrompt: true,
		HasRunning: true, HasWaiting: true, HasKV: true, HasPreemptions: true,
		PrefixQueries: queries, PrefixHits: hits, HasPrefix: true}
}

// Two vLLM replicas: the hit rate is of all their tokens, in the record
// and each replica's own; counters that cannot be true are said once, not
// once a window or a replica, and that window shows no rate.
func TestServerViewPrefixHitRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f := &fakeScrapes{each: [][]*promscrape.Sample{
		{vllmPrefixSample(at(0), 0, 0), vllmPrefixSample(at(10), 1000, 900), vllmPrefixSample(at(20), 1100, 1300), vllmPrefixSample(at(30), 1200, 1500)},
		{vllmPrefixSample(at(0), 0, 0), vllmPrefixSample(at(10), 3000, 300), vllmPrefixSample(at(20), 3100, 3500), vllmPrefixSample(at(30), 3200, 3800)},
	}}
	v := NewServerView(f.funcs())
	var said []string
	say := func(m string) { said = append(said, m) }
	v.Update(context.Background(), say)
	v.Update(context.Background(), say)
	r := v.Latest()
	if r == nil || !r.HasPrefix || r.PrefixHitRate != 0.3 {
		t.Fatalf("Latest = %+v, want a hit rate of 0.3 (1200 of 4000)", r)
	}
	each := v.Each()
	if rec := NewServerRecord(*each[0]); rec.PrefixCacheHitRate == nil || *rec.PrefixCacheHitRate != 0.9 {
		t.Errorf("the first replica's record %+v, want prefix_cache_hit_rate 0.9", rec)
	}
	v.Update(context.Background(), say)
	v.Update(context.Background(), say)
	if r := v.Latest(); r == nil || r.HasPrefix {
		t.Errorf("found more than looked up, and a hit rate shown: %+v", r)
	}
	if len(said) != 1 || !strings.Contains(said[0], "cannot be true") {
		t.Errorf("said %q, want one line that the figures cannot be true", said)
	}
}
