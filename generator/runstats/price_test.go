package runstats

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPriceCost: cached prompt tokens are billed at CachedInput, the rest
// of the prompt at Input; a server's cached count above the prompt's is
// held to it.
func TestPriceCost(t *testing.T) {
	p := Price{Input: 2.5, Output: 10, CachedInput: 1.25}
	if got, want := p.Cost(1000, 800, 100), (200*2.5+800*1.25+100*10)/1e6; got != want {
		t.Errorf("cost %v, want %v", got, want)
	}
	if got, want := p.Cost(10, 50, 0), 10*1.25/1e6; got != want {
		t.Errorf("cached above the prompt: cost %v, want %v", got, want)
	}
}

// TestCostProjected: the run's cost is its answers' sum, projected by the
// mean answer's cost over the requests to come; the progress record has
// both only when priced, the projection only after the first answer.
func TestCostProjected(t *testing.T) {
	s := NewStats(nil)
	s.SetTotal(10)
	s.SetPriced()
	if rec := NewProgressRecord(s.Snapshot(), nil); rec.Cost == nil || *rec.Cost != 0 || rec.CostProjected != nil {
		t.Errorf("before an answer: cost %v projected %v, want 0 and none", rec.Cost, rec.CostProjected)
	}
	for _, c := range []float64{0.5, 1.5} {
		s.Begin().Done(Outcome{CompletionTokens: 1, UsageKnown: true, Cost: c})
	}
	s.Begin().Fail("http_500") // no answer: nothing to come for it, no cost
	snap := s.Snapshot()
	if snap.Cost != 2 || snap.CostProjected != 2+1*7 {
		t.Errorf("cost %v projected %v, want 2 and 9 (7 to come at $1)", snap.Cost, snap.CostProjected)
	}

	plain := NewStats(nil)
	plain.SetTotal(1)
	plain.Begin().Done(Outcome{CompletionTokens: 1, UsageKnown: true})
	b, _ := json.Marshal(NewProgressRecord(plain.Snapshot(), nil))
	if strings.Contains(string(b), "cost") {
		t.Errorf("an unpriced run's record speaks of cost: %s", b)
	}
}
