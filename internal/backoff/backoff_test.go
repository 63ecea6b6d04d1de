package backoff

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

var attempts = []int{math.MinInt, -1, 0, 1, 2, 3, 10, 22, 23, 24, 62, 63, 64, 65, 1000, math.MaxInt}

// TestCeiling: Initial·2^(attempt-1) capped at Max, for every attempt: the
// doubling used to overflow from the 23rd failure of a one-hour backoff.
func TestCeiling(t *testing.T) {
	tests := []struct {
		p       Policy
		attempt int
		want    time.Duration
	}{
		{Policy{time.Second, time.Minute}, 1, time.Second},
		{Policy{time.Second, time.Minute}, 0, time.Second},
		{Policy{time.Second, time.Minute}, -5, time.Second},
		{Policy{time.Second, time.Minute}, 2, 2 * time.Second},
		{Policy{time.Second, time.Minute}, 6, 32 * time.Second},
		{Policy{time.Second, time.Minute}, 7, time.Minute},
		{Policy{time.Second, time.Minute}, math.MaxInt, time.Minute},
		{Policy{time.Second, 30 * time.Second}, 5, 16 * time.Second},
		{Policy{time.Second, 30 * time.Second}, 6, 30 * time.Second},
		{Policy{time.Hour, math.MaxInt64}, 22, time.Hour << 21},
		{Policy{time.Hour, math.MaxInt64}, 23, math.MaxInt64}, // an hour << 22 would overflow
		{Policy{time.Hour, math.MaxInt64}, 24, math.MaxInt64},
		{Policy{time.Hour, math.MaxInt64}, 63, math.MaxInt64},
		{Policy{time.Hour, math.MaxInt64}, 64, math.MaxInt64},
		{Policy{time.Hour, math.MaxInt64}, 1000, math.MaxInt64},
		{Policy{time.Hour, math.MaxInt64}, math.MaxInt, math.MaxInt64},
		{Policy{1, math.MaxInt64}, math.MaxInt, math.MaxInt64},
		{Policy{time.Minute, time.Second}, 1, time.Second}, // Initial above Max: capped
		{Policy{0, time.Minute}, math.MaxInt, 0},
		{Policy{-time.Second, time.Minute}, 3, 0},
		{Policy{time.Second, 0}, 3, 0},
		{Policy{time.Second, -time.Second}, 3, 0},
	}
	for _, tt := range tests {
		if got := tt.p.Ceiling(tt.attempt); got != tt.want {
			t.Errorf("%+v.Ceiling(%d) = %v, want %v", tt.p, tt.attempt, got, tt.want)
		}
	}
}

// TestDelayFullJitter: Delay stays in [0, Max] for every attempt, and is
// spread over [0, Ceiling] with the ceiling reachable, however large: a wait
// stuck at 0 (the overflow) or at the ceiling (no jitter) fails.
func TestDelayFullJitter(t *testing.T) {
	const samples = 2000
	for _, p := range []Policy{
		{time.Second, time.Minute},
		{100 * time.Millisecond, time.Second},
		{time.Hour, math.MaxInt64},
		{1, math.MaxInt64},
		{3 * time.Millisecond, 3 * time.Millisecond},
	} {
		for _, attempt := range attempts {
			name := fmt.Sprintf("%+v/attempt=%d", p, attempt)
			ceil := p.Ceiling(attempt)
			var mean float64
			var top time.Duration
			for range samples {
				d := p.Delay(attempt)
				if d < 0 || d > ceil || d > p.Max {
					t.Fatalf("%s: delay %v outside [0, %v]", name, d, ceil)
				}
				mean += float64(d) / float64(ceil) / samples
				top = max(top, d)
			}
			if mean < 0.4 || mean > 0.6 {
				t.Errorf("%s: mean delay %.2f of the ceiling %v, want about 0.5", name, mean, ceil)
			}
			if top < ceil/100*95 {
				t.Errorf("%s: longest of %d delays %v, want near the ceiling %v", name, samples, top, ceil)
			}
		}
	}
}

// TestDelayReachesMax: both ends of [0, Ceiling] can come out.
func TestDelayReachesMax(t *testing.T) {
	p := Policy{Initial: 1, Max: 2}
	seen := map[time.Duration]bool{}
	for range 1000 {
		seen[p.Delay(math.MaxInt)] = true
	}
	if !seen[0] || !seen[1] || !seen[2] || len(seen) != 3 {
		t.Errorf("delays seen %v, want exactly 0, 1 and 2", seen)
	}
}

func TestDelayZero(t *testing.T) {
	for _, p := range []Policy{{}, {0, time.Second}, {time.Second, 0}} {
		for _, attempt := range attempts {
			if d := p.Delay(attempt); d != 0 {
				t.Errorf("%+v.Delay(%d) = %v, want 0", p, attempt, d)
			}
		}
	}
}

func TestSleep(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	if !Sleep(ctx, 20*time.Millisecond) {
		t.Error("Sleep on a live context reported a cut wait")
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("Sleep(20ms) returned after %v", el)
	}
	if !Sleep(ctx, 0) || !Sleep(ctx, -time.Second) {
		t.Error("Sleep(<=0) on a live context reported a cut wait")
	}

	cut, cancel := context.WithCancel(ctx)
	cancel()
	if Sleep(cut, 0) {
		t.Error("Sleep(0) on an ended context reported a completed wait")
	}
	start = time.Now()
	if Sleep(cut, time.Hour) {
		t.Error("Sleep on an ended context reported a completed wait")
	}
	if el := time.Since(start); el > time.Minute { // not the hour
		t.Errorf("Sleep on an ended context took %v", el)
	}

	cut, cancel = context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if Sleep(cut, time.Hour) {
		t.Error("Sleep cut by a timeout reported a completed wait")
	}
}
