package export

import (
	"strings"
	"testing"
)

// TestCardSaysWhatTheRowsHold: a card never says the reasoning is in
// reasoning_content when no row has any.
func TestCardSaysWhatTheRowsHold(t *testing.T) {
	o := Options{Format: FormatSpecForge, Job: fixtureJob}
	card := Card(o, &Summary{Exported: 6000, FinishReasons: map[string]int64{"stop": 6000}})
	if strings.Contains(card, "reasoning_content") || !strings.Contains(card, "no row has any reasoning") {
		t.Errorf("6,000 rows without reasoning:\n%s", card)
	}
	card = Card(o, &Summary{Exported: 10, WithReasoning: 7, FinishReasons: map[string]int64{"stop": 10}})
	if !strings.Contains(card, "with the reasoning of 7 of them in `reasoning_content`") {
		t.Errorf("7 of 10 rows with reasoning:\n%s", card)
	}
}
