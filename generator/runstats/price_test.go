package runstats

import (
	"encoding/json"
	"math"
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

// TestCostProjected: the run's cost is its answers' sum; the projection
// adds, for each request to come, the mean answer's prompt cost and the
// completion tokens expected of it at the output price, the tokens a
// request in flight streamed included. The progress record has both only
// when priced, the projection only after the first answer.
func TestCostProjected(t *testing.T) {
	p := Price{Input: 1, Output: 10, CachedInput: 1}
	s := NewStats(nil)
	s.SetTotal(10)
	s.SetPrice(p)
	if rec := NewProgressRecord(s.Snapshot(), nil); rec.Cost == nil || *rec.Cost != 0 || rec.CostProjected != nil {
		t.Errorf("before an answer: cost %v projected %v, want 0 and none", rec.Cost, rec.CostProjected)
	}
	for range 2 {
		// $0.10 of prompt and $1 of completion each.
		s.Begin().Done(Outcome{PromptTokens: 1e5, CompletionTokens: 1e5, UsageKnown: true, Cost: p.Cost(1e5, 0, 1e5)})
	}
	s.Begin().Fail("http_500") // no answer: no cost, and not to come
	s.Begin().Delta(5e4)       // in flight, half the length of the others
	snap := s.Snapshot()
	// 7 to come, the one in flight among them: 7 prompts at $0.10, and
	// 7e5 completion tokens (6 answers of 1e5 and the 5e4 streamed plus 5e4
	// expected of the one in flight) at $10 a million.
	if want := 2.2 + 0.7 + 7; math.Abs(snap.Cost-2.2) > 1e-9 || math.Abs(snap.CostProjected-want) > 1e-9 {
		t.Errorf("cost %v projected %v, want 2.2 and %v", snap.Cost, snap.CostProjected, want)
	}

	plain := NewStats(nil)
	plain.SetTotal(1)
	plain.Begin().Done(Outcome{CompletionTokens: 1, UsageKnown: true})
	b, _ := json.Marshal(NewProgressRecord(plain.Snapshot(), nil))
	if strings.Contains(string(b), "cost") {
		t.Errorf("an unpriced run's record speaks of cost: %s", b)
	}
}
