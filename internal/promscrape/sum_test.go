package promscrape

import (
	"math"
	"testing"
	"time"
)

func TestSum(t *testing.T) {
	got := Sum([]Rates{
		{GenTokPerSec: 100, PromptTokPerSec: 10, Running: 2, Waiting: 1, Preemptions: 1, Window: 10 * time.Second, HasSpec: true, AcceptanceRate: 0.5, MeanAcceptanceLength: 2},
		{GenTokPerSec: 300, PromptTokPerSec: 30, Running: 4, Waiting: 0, Window: 12 * time.Second, HasKV: true, KVCacheUsage: 0.4, HasSpec: true, AcceptanceRate: 0.9, MeanAcceptanceLength: 3},
	})
	want := Rates{GenTokPerSec: 400, PromptTokPerSec: 40, Running: 6, Waiting: 1, Preemptions: 1, Window: 12 * time.Second,
		HasKV: true, KVCacheUsage: 0.4, HasSpec: true, AcceptanceRate: 0.8, MeanAcceptanceLength: 2.75, Servers: 2}
	if math.Abs(got.AcceptanceRate-want.AcceptanceRate) > 1e-9 || math.Abs(got.MeanAcceptanceLength-want.MeanAcceptanceLength) > 1e-9 {
		t.Errorf("spec = %v / %v, want %v / %v (weighted by generation rate)", got.AcceptanceRate, got.MeanAcceptanceLength, want.AcceptanceRate, want.MeanAcceptanceLength)
	}
	got.AcceptanceRate, got.MeanAcceptanceLength = want.AcceptanceRate, want.MeanAcceptanceLength
	if got != want {
		t.Errorf("Sum = %+v\nwant %+v", got, want)
	}
}
