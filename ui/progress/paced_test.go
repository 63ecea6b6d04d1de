package progress

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats"
)

// pacedGate is an endpoint whose requests wait for their share of its rate
// limits.
type pacedGate struct{ n int64 }

func (g pacedGate) State() runstats.GateState {
	return runstats.GateState{Paced: g.n, PacedBy: "tokens"}
}

// While requests wait for their share of a hosted endpoint's limits, the
// progress line and status.json say how many and which limit binds; the
// endpoint stays up.
func TestPacingIsSaid(t *testing.T) {
	stats, _ := rampStats()
	eps := stats.EndpointLedgers(2)
	eps[0].SetGate(pacedGate{n: 30})
	eps[1].SetGate(pacedGate{n: 7})
	snap := stats.Snapshot()
	if got := Line(snap, nil, nil); !strings.Contains(got, " | retries 0 | paced 37 (tokens) |") {
		t.Errorf("Line while paced = %q", got)
	}
	b, err := json.Marshal(runstats.NewProgressRecord(snap, nil))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Paced     int64  `json:"paced"`
		PacedBy   string `json:"paced_by"`
		Endpoints []struct {
			State   string `json:"state"`
			Paced   int64  `json:"paced"`
			PacedBy string `json:"paced_by"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Paced != 37 || rec.PacedBy != "tokens" || len(rec.Endpoints) != 2 ||
		rec.Endpoints[0].Paced != 30 || rec.Endpoints[0].PacedBy != "tokens" || rec.Endpoints[0].State != runstats.EndpointUp {
		t.Errorf("status record while paced: %s", b)
	}
	eps[0].SetGate(pacedGate{})
	eps[1].SetGate(pacedGate{})
	if got := Line(stats.Snapshot(), nil, nil); strings.Contains(got, "paced") {
		t.Errorf("formatLine with none paced = %q", got)
	}
}
