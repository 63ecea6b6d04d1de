package runstats

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// fakeScrapes hands out each endpoint's samples in turn; a nil sample is a
// failed scrape.
type fakeScrapes struct {
	each [][]*promscrape.Sample
}

func (f *fakeScrapes) funcs() []func(context.Context) (promscrape.Sample, error) {
	var out []func(context.Context) (promscrape.Sample, error)
	for i := range f.each {
		n := 0
		out = append(out, func(context.Context) (promscrape.Sample, error) {
			s := f.each[i][n]
			n++
			if s == nil {
				return promscrape.Sample{}, errors.New("scrape http://gpu/metrics: 501 Not Implemented: Start it with `--metrics`")
			}
			return *s, nil
		})
	}
	return out
}

func llamaSample(at time.Time, gen float64) *promscrape.Sample {
	return &promscrape.Sample{At: at, Kind: promscrape.KindLlamaCpp, GenerationTokens: gen, Running: 2,
		HasGeneration: true, HasPrompt: true, HasRunning: true, HasWaiting: true}
}

// Two llama.cpp replicas: what their kind lacks is said once, not once a
// replica; an outage passes the server's message on; the recovery names
// the kind; the record names it too.
func TestServerViewNamesTheKind(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f := &fakeScrapes{each: [][]*promscrape.Sample{
		{llamaSample(at(0), 0), llamaSample(at(10), 1000), nil, llamaSample(at(30), 3000), llamaSample(at(40), 4000)},
		{llamaSample(at(0), 0), llamaSample(at(10), 500), llamaSample(at(20), 1000), llamaSample(at(30), 1500), llamaSample(at(40), 2000)},
	}}
	v := NewServerView(f.funcs())
	v.At(Snapshot{Done: 1}) // an answer done: what a sample lacks now stays lacking
	var said []string
	say := func(m string) { said = append(said, m) }
	for range 5 {
		v.Update(context.Background(), say)
	}
	want := []string{
		"metrics: llama.cpp's /metrics has no KV-cache usage nor preemptions; the server's view shows what it reports",
		"metrics: scrape http://gpu/metrics: 501 Not Implemented: Start it with `--metrics`; not showing the server's view (retrying quietly)",
		"metrics: reachable again; showing llama.cpp's view",
	}
	if strings.Join(said, "\n") != strings.Join(want, "\n") {
		t.Errorf("said:\n%s\nwant:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}
	r := v.Latest()
	if r == nil || r.Kind != promscrape.KindLlamaCpp || r.GenTokPerSec != 150 {
		t.Fatalf("Latest = %+v, want llama.cpp's summed 100+50 tok/s", r)
	}
	if rec := NewServerRecord(*r); rec.Kind != "llamacpp" || rec.Preemptions != nil || rec.KVCacheUsage != nil {
		t.Errorf("record = %+v, want kind llamacpp and no KV nor preemptions", rec)
	}
	if rec := NewServerRecord(promscrape.Rates{Kind: promscrape.KindUnknown}); rec.Kind != "" {
		t.Errorf("unknown kind recorded as %q", rec.Kind)
	}
}

// The check of issue 41: no two consecutive progress records show the
// same server figures unless the later says their age. A shared scrape
// hands the same sample to a tick that came early, and the final record
// follows the last tick with no scrape between.
func TestServerViewMarksFiguresShownAgain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	same := llamaSample(at(10), 1000)
	f := &fakeScrapes{each: [][]*promscrape.Sample{
		{llamaSample(at(0), 0), same, same, llamaSample(at(20), 3000)},
	}}
	v := NewServerView(f.funcs())
	say := func(string) {}
	var recs []ProgressRecord
	for i, now := range []int{0, 10, 14, 20, 21} { // the last: the final record, no scrape
		if i < 4 {
			v.Update(context.Background(), say)
		}
		recs = append(recs, v.Record(Snapshot{At: at(now)}))
	}
	if recs[0].Server != nil {
		t.Errorf("one sample: server = %+v, want none (no rate yet)", recs[0].Server)
	}
	for i := 1; i < len(recs); i++ {
		prev, cur := recs[i-1].Server, recs[i].Server
		if prev == nil || cur == nil {
			continue
		}
		if prev.GenTokPerS == cur.GenTokPerS && prev.WindowS == cur.WindowS && cur.AgeS == nil {
			t.Errorf("records %d and %d show the same figures (%v tok/s over %vs), the later not marked old", i-1, i, cur.GenTokPerS, cur.WindowS)
		}
	}
	for i, want := range []float64{-1, -1, 4, -1, 1} { // -1: fresh
		s := recs[i].Server
		switch {
		case want < 0 && s != nil && s.AgeS != nil:
			t.Errorf("record %d: age %v, want fresh figures", i, *s.AgeS)
		case want >= 0 && (s == nil || s.AgeS == nil || *s.AgeS != want):
			t.Errorf("record %d: server %+v, want figures %vs old", i, s, want)
		}
	}
}

// A fresh vLLM shows its token and preemption counters only once its
// first request finishes (issue 41: llm-d-inference-sim): samples before
// the run's first answer lacking them say nothing; a counter that stays
// missing after it is said, once.
func TestServerViewSaysMissingOnlyWhenItStays(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	bare := func(s int) *promscrape.Sample { // gauges only: no counters yet
		return &promscrape.Sample{At: at(s), Kind: promscrape.KindVLLM, HasRunning: true, HasWaiting: true, HasKV: true}
	}
	full := func(s int, gen float64) *promscrape.Sample {
		smp := bare(s)
		smp.GenerationTokens, smp.HasGeneration, smp.HasPrompt, smp.HasPreemptions = gen, true, true, true
		return smp
	}
	for _, c := range []struct {
		name    string
		samples []*promscrape.Sample
		want    string
	}{
		{"counters come with the first answer", []*promscrape.Sample{bare(0), bare(10), full(20, 100), full(30, 200)}, ""},
		{"counters never come", []*promscrape.Sample{bare(0), bare(10), bare(20), bare(30)},
			"metrics: vLLM's /metrics has no generated tokens nor prompt tokens nor preemptions; the server's view shows what it reports"},
	} {
		f := &fakeScrapes{each: [][]*promscrape.Sample{c.samples}}
		v := NewServerView(f.funcs())
		var said []string
		for i := range c.samples {
			v.Update(context.Background(), func(m string) { said = append(said, m) })
			// The run's first answer is done by the third sample.
			v.At(Snapshot{Done: int64(max(i-1, 0))})
		}
		if got := strings.Join(said, "\n"); got != c.want {
			t.Errorf("%s: said %q, want %q", c.name, got, c.want)
		}
	}
}
