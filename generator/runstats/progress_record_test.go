package runstats

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// While the server is away the record says since when, and says nothing
// once it is back.
func TestProgressRecordServerDown(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	stats := NewStats(func() time.Time { return at })
	stats.SetServerDown(true, at.Add(-3*time.Minute))
	if rec := NewProgressRecord(stats.Snapshot(), nil); rec.ServerDownSince == nil || !rec.ServerDownSince.Equal(at.Add(-3*time.Minute)) {
		t.Errorf("progress record server_down_since = %v", rec.ServerDownSince)
	}
	stats.SetServerDown(false, time.Time{})
	if rec := NewProgressRecord(stats.Snapshot(), nil); rec.ServerDownSince != nil {
		t.Errorf("server_down_since after the server came back = %v", rec.ServerDownSince)
	}
}

// JSON cannot carry NaN or infinities: an unknown figure is null (eta_s)
// or left out (the server's optional gauges), never an encoding error.
func TestProgressRecordNotFinite(t *testing.T) {
	snap := Snapshot{ExpectedCompletion: math.NaN(), ETAKnown: false, Confidence: "low"}
	server := &promscrape.Rates{HasKV: true, KVCacheUsage: math.Inf(1), HasSpec: true,
		AcceptanceRate: math.NaN(), MeanAcceptanceLength: 2.5}
	b, err := json.Marshal(NewProgressRecord(snap, server))
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	for _, want := range []string{`"expected_completion":0,`, `"eta_s":null,`, `"spec_mean_acceptance_length":2.5`} {
		if !strings.Contains(js, want) {
			t.Errorf("record lacks %s:\n%s", want, js)
		}
	}
	for _, absent := range []string{"eta_error_s", "kv_cache_usage", "spec_acceptance_rate", "server_down_since"} {
		if strings.Contains(js, absent) {
			t.Errorf("record has %s:\n%s", absent, js)
		}
	}
}
