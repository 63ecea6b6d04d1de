package runstats

import (
	"math"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for Stats: every figure below is checked
// against a value worked out by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func checkF(t *testing.T, name string, got, want float64) {
	t.Helper()
	if !near(got, want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func checkI(t *testing.T, name string, got, want int64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", name, got, want)
	}
}

func checkD(t *testing.T, name string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// The ramp: 200 long answers start together and none finishes for minutes.
// tok/s must be right from the first second although req/s is 0.
func TestStatsRampTokensWithoutCompletions(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(25000)
	reqs := make([]*Tracker, 200)
	for i := range reqs {
		reqs[i] = s.Begin()
	}
	// Each request streams 30 deltas per second for 5 seconds.
	for sec := 0; sec < 5; sec++ {
		for _, r := range reqs {
			for k := 0; k < 3; k++ {
				r.Delta(10)
			}
		}
		clk.advance(time.Second)
	}
	snap := s.Snapshot()
	checkD(t, "Elapsed", snap.Elapsed, 5*time.Second)
	checkI(t, "Done", snap.Done, 0)
	checkI(t, "InFlight", snap.InFlight, 200)
	checkI(t, "CompletionTokens", snap.CompletionTokens, 200*150)
	checkI(t, "RunningTokens", snap.RunningTokens, 200*150)
	checkF(t, "ReqPerSec", snap.ReqPerSec, 0)
	checkF(t, "TokPerSec", snap.TokPerSec, 6000)
	// Shorter than both windows: they equal the cumulative rate.
	checkF(t, "Last10s.TokPerSec", snap.Last10s.TokPerSec, 6000)
	checkD(t, "Last10s.Span", snap.Last10s.Span, 5*time.Second)
	checkF(t, "Last60s.TokPerSec", snap.Last60s.TokPerSec, 6000)
	// No completion yet: every request is censored at 150 tokens, the
	// product-limit estimate is the longest observation, 150.
	checkF(t, "ExpectedCompletion", snap.ExpectedCompletion, 150)
	if !math.IsNaN(snap.ExpectedCompletionSE) {
		t.Errorf("ExpectedCompletionSE = %v, want NaN with no completions", snap.ExpectedCompletionSE)
	}
	// 24800 not started × 150 + 200 running × max(150-150, 0) = 3,720,000
	// tokens at 6000 tok/s = 620 s.
	checkF(t, "RemainingTokens", snap.RemainingTokens, 3720000)
	if !snap.ETAKnown {
		t.Fatal("ETAKnown = false during a ramp with tokens flowing")
	}
	checkD(t, "ETA", snap.ETA, 620*time.Second)
	// No answer yet to measure the rate on: the error bar is the whole
	// estimate, not a certainty the ETA has not earned.
	checkD(t, "ETAError", snap.ETAError, 620*time.Second)
	if snap.Confidence != "low" {
		t.Errorf("Confidence = %q, want low", snap.Confidence)
	}
}

// Usage is the truth: at completion the streamed count is corrected to
// usage.completion_tokens, in the cumulative total and in the window of the
// completion.
func TestStatsUsageCorrectsStreamedCount(t *testing.T) {
	tests := []struct {
		name       string
		deltas     int
		outcome    Outcome
		wantTokens int64
	}{
		{"usage above deltas (speculative decoding)", 100, Outcome{CompletionTokens: 250, UsageKnown: true, Deltas: 100}, 250},
		{"usage below deltas", 100, Outcome{CompletionTokens: 90, UsageKnown: true, Deltas: 100}, 90},
		{"no usage: deltas stand", 100, Outcome{Deltas: 100}, 100},
		{"no usage, outcome deltas win over the count", 100, Outcome{Deltas: 120}, 120},
		{"not streaming: all credited at completion", 0, Outcome{CompletionTokens: 400, UsageKnown: true}, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			s := NewStats(clk.now)
			s.SetTotal(1)
			r := s.Begin()
			r.Delta(tc.deltas)
			clk.advance(2 * time.Second)
			r.Done(tc.outcome)
			snap := s.Snapshot()
			checkI(t, "CompletionTokens", snap.CompletionTokens, tc.wantTokens)
			checkI(t, "RunningTokens", snap.RunningTokens, 0)
			checkF(t, "TokPerSec", snap.TokPerSec, float64(tc.wantTokens)/2)
			checkI(t, "CompletionMax", snap.CompletionMax, tc.wantTokens)
			checkI(t, "InFlight", snap.InFlight, 0)
		})
	}
}

// Window rates sum whole seconds; the second in progress is left out, and
// the corrections land in the second they happen.
func TestStatsWindows(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(100)
	r := s.Begin() // t = 0
	// Seconds 0..59: 100 deltas each. Seconds 60..69: 400 deltas each.
	for sec := 0; sec < 70; sec++ {
		n := 100
		if sec >= 60 {
			n = 400
		}
		r.Delta(n)
		clk.advance(time.Second)
	}
	// t = 70.5 s: the partial second 70 gets deltas that no window counts.
	clk.advance(500 * time.Millisecond)
	r.Delta(1000)
	snap := s.Snapshot()
	checkD(t, "Elapsed", snap.Elapsed, 70500*time.Millisecond)
	checkD(t, "Last10s.Span", snap.Last10s.Span, 10*time.Second)
	checkF(t, "Last10s.TokPerSec", snap.Last10s.TokPerSec, 400)
	// Seconds 10..69: 50×100 + 10×400 = 9000 over 60 s.
	checkF(t, "Last60s.TokPerSec", snap.Last60s.TokPerSec, 150)
	// Cumulative: 6000 + 4000 + 1000 over 70.5 s.
	checkF(t, "TokPerSec", snap.TokPerSec, 11000/70.5)

	// A completion in second 70 with usage 11500: correction +500, one
	// request, 300 prompt tokens. Seen by the windows once second 70 is whole.
	r.Done(Outcome{CompletionTokens: 11500, UsageKnown: true, PromptTokens: 300, Deltas: 11000})
	clk.advance(time.Second) // t = 71.5
	snap = s.Snapshot()
	// Seconds 61..70: 9×400 + 1000 + 500 = 5100.
	checkF(t, "Last10s.TokPerSec", snap.Last10s.TokPerSec, 510)
	checkF(t, "Last10s.ReqPerSec", snap.Last10s.ReqPerSec, 0.1)
	checkF(t, "Last10s.PromptTokPerSec", snap.Last10s.PromptTokPerSec, 30)
	// Seconds 11..70: 49×100 + 10×400 + 1500 = 10400.
	checkF(t, "Last60s.TokPerSec", snap.Last60s.TokPerSec, 10400.0/60)
	checkF(t, "Last60s.ReqPerSec", snap.Last60s.ReqPerSec, 1.0/60)
	checkF(t, "ReqPerSec", snap.ReqPerSec, 1/71.5)
	checkF(t, "PromptTokPerSec", snap.PromptTokPerSec, 300/71.5)

	// Two minutes of silence: the ring forgets, the windows read zero.
	clk.advance(2 * time.Minute)
	snap = s.Snapshot()
	checkF(t, "Last10s.TokPerSec after silence", snap.Last10s.TokPerSec, 0)
	checkF(t, "Last60s.TokPerSec after silence", snap.Last60s.TokPerSec, 0)
	checkF(t, "Last60s.ReqPerSec after silence", snap.Last60s.ReqPerSec, 0)
}

// A retry takes the attempt's tokens back; a failure too. Both are counted
// by cause.
func TestStatsRetryAndFail(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(3)
	a, b := s.Begin(), s.Begin()
	a.Delta(50)
	b.Delta(70)
	clk.advance(time.Second)
	a.Retry("stream_cut")
	a.Retry("http_429")
	a.Delta(20)
	b.Fail("timeout")
	clk.advance(time.Second)
	snap := s.Snapshot()
	checkI(t, "Retries", snap.Retries, 2)
	checkI(t, "RetriesByCause[stream_cut]", snap.RetriesByCause["stream_cut"], 1)
	checkI(t, "RetriesByCause[http_429]", snap.RetriesByCause["http_429"], 1)
	checkI(t, "Errors", snap.Errors, 1)
	checkI(t, "ErrorsByCause[timeout]", snap.ErrorsByCause["timeout"], 1)
	checkI(t, "InFlight", snap.InFlight, 1)
	checkI(t, "CompletionTokens", snap.CompletionTokens, 20)
	checkF(t, "TokPerSec", snap.TokPerSec, 10)

	a.Done(Outcome{CompletionTokens: 20, UsageKnown: true, Deltas: 20, Attempts: 3})
	a.Fail("late") // a second end is ignored: in-flight counts stay true
	snap = s.Snapshot()
	checkI(t, "Done", snap.Done, 1)
	checkI(t, "Errors after double end", snap.Errors, 1)
	checkI(t, "InFlight", snap.InFlight, 0)
	// The snapshot's maps are copies.
	snap.ErrorsByCause["timeout"] = 99
	checkI(t, "ErrorsByCause after caller edit", s.Snapshot().ErrorsByCause["timeout"], 1)
}

// The 10 s and 60 s windows take back a retried attempt's and a failed
// request's streamed tokens too, in the second of the retry or the failure,
// not only the run-long rate: a window that kept them would show tokens no
// record holds.
func TestStatsWindowsTakeBackRetriesAndFailures(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(3)
	a, b, c := s.Begin(), s.Begin(), s.Begin() // t = 0
	for sec := 0; sec < 70; sec++ {
		if sec == 65 {
			// t = 65: a's attempt is retried (650 deltas back), b fails
			// for good (1300 back).
			a.Retry("stream_cut")
			b.Fail("timeout")
		}
		a.Delta(10)
		if sec < 65 {
			b.Delta(20)
		}
		c.Delta(400)
		clk.advance(time.Second)
	}
	clk.advance(500 * time.Millisecond) // t = 70.5: seconds 0..69 are whole
	snap := s.Snapshot()
	// Seconds 60..69: a 100, b 100, c 4000, the take-back -1950.
	checkF(t, "Last10s.TokPerSec", snap.Last10s.TokPerSec, 2250.0/10)
	// Seconds 10..69: a 600, b 1100, c 24000, the take-back -1950.
	checkF(t, "Last60s.TokPerSec", snap.Last60s.TokPerSec, 23750.0/60)
	// The run: a's current attempt (50) and c (28000).
	checkF(t, "TokPerSec", snap.TokPerSec, 28050/70.5)

	// Once the take-back's second leaves a window, that window holds only
	// the running requests' deltas: seconds 66..75, a 100 and c 4000.
	for range 6 {
		a.Delta(10)
		c.Delta(400)
		clk.advance(time.Second)
	}
	checkF(t, "Last10s.TokPerSec later", s.Snapshot().Last10s.TokPerSec, 4100.0/10)
}

// Length, latency percentiles (nearest rank), truncated share and resume.
func TestStatsDistributions(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.AddAlreadyDone(40)
	s.SetTotal(20)
	// Ten completions: lengths 100, 200, ..., 1000; TTFT i×100 ms; latency
	// TTFT + (deltas-1) × i ms, so the ITL of request i is i ms.
	for i := 1; i <= 10; i++ {
		r := s.Begin()
		r.Delta(i * 100)
		finish := "stop"
		if i > 8 {
			finish = "length"
		}
		ttft := time.Duration(i) * 100 * time.Millisecond
		r.Done(Outcome{
			CompletionTokens: i * 100, UsageKnown: true, PromptTokens: 10,
			Deltas: i * 100, FinishReason: finish,
			TTFT: ttft, Latency: ttft + time.Duration(i*100-1)*time.Duration(i)*time.Millisecond,
		})
	}
	clk.advance(10 * time.Second)
	snap := s.Snapshot()
	checkI(t, "Completed", snap.Completed(), 50)
	checkI(t, "Planned", snap.Planned(), 60)
	checkF(t, "ReqPerSec (this run only)", snap.ReqPerSec, 1)
	checkF(t, "CompletionAvg", snap.CompletionAvg, 550)
	checkI(t, "CompletionP50", snap.CompletionP50, 500)
	checkI(t, "CompletionP90", snap.CompletionP90, 900)
	checkI(t, "CompletionMax", snap.CompletionMax, 1000)
	checkD(t, "TTFTP50", snap.TTFTP50, 500*time.Millisecond)
	checkD(t, "TTFTP90", snap.TTFTP90, 900*time.Millisecond)
	checkD(t, "ITLP50", snap.ITLP50, 5*time.Millisecond)
	checkD(t, "ITLP90", snap.ITLP90, 9*time.Millisecond)
	checkI(t, "Truncated", snap.Truncated, 2)
	checkF(t, "TruncatedShare", snap.TruncatedShare, 0.2)
	checkI(t, "PromptTokens", snap.PromptTokens, 100)

	// Nothing running: the estimate is the plain mean, the SE the
	// population sd over sqrt(n): sd of 100..1000 is sqrt(82500).
	checkF(t, "ExpectedCompletion", snap.ExpectedCompletion, 550)
	checkF(t, "ExpectedCompletionSE", snap.ExpectedCompletionSE, math.Sqrt(82500)/math.Sqrt(10))
	// 10 left × 550 tokens at 5500/10 s = 550 tok/s: 10 s ± 10×SE/550 for
	// the lengths, and ± 10 s/sqrt(10) for a rate measured on 10 answers.
	checkD(t, "ETA", snap.ETA, 10*time.Second)
	checkD(t, "ETAError", snap.ETAError, secondsToDuration(math.Hypot(10*math.Sqrt(8250)/550, 10/math.Sqrt(10))))

	// A retried request's latency spans its earlier attempts: no ITL from it.
	r := s.Begin()
	r.Delta(1000)
	r.Done(Outcome{CompletionTokens: 1000, UsageKnown: true, Deltas: 1000, TTFT: time.Millisecond, Latency: time.Hour, Attempts: 2})
	if got := s.Snapshot().ITLP90; got != 9*time.Millisecond {
		t.Errorf("ITLP90 after a retried request = %v, want 9ms unchanged", got)
	}
}

// The ETA's bias correction: short answers finish first, so the completed
// mean is too low; running requests count as censored at their tokens.
func TestStatsETABiasCorrection(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(10)
	running := make([]*Tracker, 4)
	for i := range running {
		running[i] = s.Begin()
	}
	short := []int{100, 200}
	for _, n := range short {
		r := s.Begin()
		r.Delta(n)
		r.Done(Outcome{CompletionTokens: n, UsageKnown: true, Deltas: n})
	}
	// Running: 50 (started late), 400, 400, 600.
	for i, n := range []int{50, 400, 400, 600} {
		running[i].Delta(n)
	}
	clk.advance(10 * time.Second)
	snap := s.Snapshot()
	// Completed mean 150 and the naive mean over all six (1750/6) are both
	// too low. Product-limit over {50+, 100, 200, 400+, 400+, 600+} (+ =
	// still running): 50+ leaves the risk set; at 100, 5 at risk, S = 4/5;
	// at 200, 4 at risk, S = 3/5; restricted to 600:
	// mean = 100 + 4/5×(200-100) + 3/5×(600-200) = 420.
	checkF(t, "ExpectedCompletion", snap.ExpectedCompletion, 420)
	if snap.ExpectedCompletion < 1750.0/6 || snap.ExpectedCompletion < 150 {
		t.Errorf("ExpectedCompletion %v below the naive means", snap.ExpectedCompletion)
	}
	// E[X²] = 100² + 4/5(200²-100²) + 3/5(600²-200²) = 10000+24000+192000.
	m2 := 226000.0
	checkF(t, "ExpectedCompletionSE", snap.ExpectedCompletionSE, math.Sqrt(m2-420*420)/math.Sqrt(2))
	// Tokens credited: 300 + 1450 = 1750 over 10 s = 175 tok/s.
	checkF(t, "TokPerSec", snap.TokPerSec, 175)
	// Remaining: 4 not started × 420, and each running request the mean
	// residual length at its tokens: at 50, (600-50)·S over S(50) = 1:
	// 50 + 4/5×100 + 3/5×400 = 370; at 400, 3/5×200 over 3/5 = 200 (the
	// answers longer than 400 run to 600 here); at 600, the longest, 0:
	// 1680 + 370 + 200 + 200 + 0 = 2450 tokens at 175 tok/s = 14 s.
	checkF(t, "RemainingTokens", snap.RemainingTokens, 2450)
	checkD(t, "ETA", snap.ETA, 14*time.Second)
	// The lengths' error for the 8 to come, and the rate's: 2 answers in
	// its window, ± 14 s/sqrt(2).
	checkD(t, "ETAError", snap.ETAError, secondsToDuration(math.Hypot(8*snap.ExpectedCompletionSE/175, 14/math.Sqrt(2))))

	// The completed-only ETA would have said 4×150 + 0 + ... : far lower.
	naive := (4*150 + 100) / 175.0
	if snap.ETA.Seconds() <= naive {
		t.Errorf("ETA %v not above the naive %vs", snap.ETA, naive)
	}
}

// The tail: the last requests in flight are past the mean length, the
// overall rate of the run is high, and the old ETA (max(mean - tokens, 0)
// each, over the overall rate) said "0s" while they needed seconds more.
// Each request in flight still needs the mean residual length at its
// tokens, and the run cannot end before the slowest has streamed that at
// its own rate.
func TestStatsETATail(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(12)
	a, b := s.Begin(), s.Begin()
	a.Delta(10) // the first deltas: each request's rate counts from them
	b.Delta(10)
	for n := 100; n <= 1000; n += 100 {
		r := s.Begin()
		r.Delta(n)
		r.Done(Outcome{CompletionTokens: n, UsageKnown: true, Deltas: n})
	}
	clk.advance(5 * time.Second)
	a.Delta(640)
	b.Delta(940)
	clk.advance(5 * time.Second)
	snap := s.Snapshot()
	// Product-limit over 100, 200, ..., 1000 with 650+ and 950+ running:
	// S = 11/12, 10/12, ..., 6/12 after 100..600; 650+ leaves the risk set;
	// S = 0.4, 0.3, 0.2 after 700, 800, 900; 950+ leaves; 0 after 1000.
	// Mean = 100 + 100×(11+10+9+8+7+6)/12 + 100×(0.4+0.3+0.2) = 615: both
	// requests are past it.
	checkF(t, "ExpectedCompletion", snap.ExpectedCompletion, 615)
	// Residual at 650: (50×0.5 + 100×0.4 + 100×0.3 + 100×0.2) / 0.5 = 230;
	// at 950: 50×0.2 / 0.2 = 50.
	checkF(t, "RemainingTokens", snap.RemainingTokens, 280)
	// Overall: 5500 + 1600 tokens over 10 s = 710 tok/s, 280 of them in
	// 0.39 s. Their own rates: 640 and 940 tokens in the 10 s since their
	// first delta, 64 and 94 tok/s: a needs 230/64 = 3.59375 s, b 0.53 s.
	checkF(t, "Last60s.TokPerSec", snap.Last60s.TokPerSec, 710)
	if !snap.ETAKnown {
		t.Fatal("ETAKnown = false with two requests streaming")
	}
	checkD(t, "ETA", snap.ETA, 3593750*time.Microsecond)

	// A retried attempt streams from its own first delta.
	a.Retry("stream_cut")
	a.Delta(5)
	clk.advance(time.Second)
	a.Delta(20)
	if got, want := a.ownRate(clk.now().Sub(s.start)), 20.0; got != want {
		t.Errorf("own rate after a retry = %v, want %v", got, want)
	}
}

// answering is a run of 10 keys whose first answer came after a second:
// its ETA is known, for a reason to take it away.
func answering(t *testing.T) (*Stats, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetTotal(10)
	r := s.Begin()
	clk.advance(time.Second)
	r.Done(Outcome{CompletionTokens: 100, UsageKnown: true})
	if snap := s.Snapshot(); !snap.ETAKnown || snap.ETAUnknown != "" {
		t.Fatalf("answering: ETAKnown=%v ETAUnknown=%q, want known", snap.ETAKnown, snap.ETAUnknown)
	}
	return s, clk
}

func TestStatsETAStates(t *testing.T) {
	t.Run("before any request", func(t *testing.T) {
		s := NewStats(newFakeClock().now)
		s.SetTotal(5)
		snap := s.Snapshot()
		if snap.ETAKnown || snap.Elapsed != 0 || snap.TokPerSec != 0 {
			t.Errorf("empty ledger: ETAKnown=%v Elapsed=%v TokPerSec=%v", snap.ETAKnown, snap.Elapsed, snap.TokPerSec)
		}
	})
	t.Run("all done", func(t *testing.T) {
		clk := newFakeClock()
		s := NewStats(clk.now)
		s.SetTotal(1)
		r := s.Begin()
		clk.advance(time.Second)
		r.Done(Outcome{CompletionTokens: 5, UsageKnown: true})
		snap := s.Snapshot()
		if !snap.ETAKnown || snap.ETA != 0 {
			t.Errorf("ETAKnown=%v ETA=%v, want known 0", snap.ETAKnown, snap.ETA)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		clk := newFakeClock()
		s := NewStats(clk.now)
		s.SetTotal(2)
		s.Begin()
		clk.advance(time.Minute)
		if snap := s.Snapshot(); snap.ETAKnown {
			t.Errorf("no tokens yet, ETAKnown = true (ETA %v)", snap.ETA)
		}
	})
	t.Run("outage", func(t *testing.T) {
		// Answers came, then the server went away: the ETA does not
		// grow with the falling rate, it says the outage.
		s, clk := answering(t)
		s.SetServerDown(true, clk.now())
		clk.advance(time.Minute)
		if snap := s.Snapshot(); snap.ETAKnown || snap.ETAUnknown != "outage" {
			t.Errorf("down: ETAKnown=%v (ETA %v) ETAUnknown=%q, want unknown for the outage", snap.ETAKnown, snap.ETA, snap.ETAUnknown)
		}
		s.SetServerDown(false, clk.now())
		if snap := s.Snapshot(); snap.ETAUnknown != "" {
			t.Errorf("back: ETAUnknown %q still set", snap.ETAUnknown)
		}
	})
	t.Run("batch", func(t *testing.T) {
		// In the batch mode the answers come a batch at a time: the rate
		// of the last minute says nothing of when the next batch ends.
		s, _ := answering(t)
		s.Begin()
		s.SetBatches([]BatchRecord{{Number: 1, State: "submitted", Requests: 9}})
		if snap := s.Snapshot(); snap.ETAKnown || snap.ETAUnknown != "batch" {
			t.Errorf("batches out: ETAKnown=%v (ETA %v) ETAUnknown=%q, want unknown for the batch mode", snap.ETAKnown, snap.ETA, snap.ETAUnknown)
		}
	})
	t.Run("confidence", func(t *testing.T) {
		for _, c := range []struct {
			done int64
			want string
		}{{0, "low"}, {29, "low"}, {30, "medium"}, {299, "medium"}, {300, "high"}} {
			if got := confidence(c.done); got != c.want {
				t.Errorf("confidence(%d) = %q, want %q", c.done, got, c.want)
			}
		}
	})
}

// Concurrent use from many goroutines, as the engine does it; run with -race.
func TestStatsConcurrent(t *testing.T) {
	s := NewStats(nil)
	const workers, per, deltas = 16, 50, 20
	s.SetTotal(workers * per)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r := s.Begin()
				for d := 0; d < deltas; d++ {
					r.Delta(1)
				}
				r.Done(Outcome{Deltas: deltas})
				_ = s.Snapshot()
			}
		}()
	}
	wg.Wait()
	snap := s.Snapshot()
	checkI(t, "Done", snap.Done, workers*per)
	checkI(t, "CompletionTokens", snap.CompletionTokens, workers*per*deltas)
	checkI(t, "InFlight", snap.InFlight, 0)
}

// The reservoir keeps memory bounded and the quantiles close.
func TestSampleSetReservoir(t *testing.T) {
	var ss sampleSet
	ss.seed = 1
	const n = 3 * maxSamples
	for i := int64(1); i <= n; i++ {
		ss.add(i)
	}
	if len(ss.vals) != maxSamples {
		t.Fatalf("kept %d samples, want %d", len(ss.vals), maxSamples)
	}
	checkI(t, "max", ss.max, n)
	p50 := float64(ss.quantile(0.5))
	if math.Abs(p50-n/2) > 0.01*n {
		t.Errorf("p50 = %v, want within 1%% of %v", p50, n/2)
	}
}

func BenchmarkStatsDelta(b *testing.B) {
	s := NewStats(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := s.Begin()
		for pb.Next() {
			r.Delta(1)
		}
		r.Done(Outcome{})
	})
}

func BenchmarkStatsSnapshot(b *testing.B) {
	s := NewStats(nil)
	for i := 0; i < 25000; i++ {
		r := s.Begin()
		r.Delta(i % 2000)
		r.Done(Outcome{CompletionTokens: i % 2000, UsageKnown: true, TTFT: time.Millisecond, Latency: time.Second, Deltas: i % 2000})
	}
	for i := 0; i < 200; i++ {
		s.Begin().Delta(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = s.Snapshot()
	}
}

// TestStatsResumeTotals: on resume the engine finds done keys as it reaches
// them; done/planned must stay the selection's size, not grow with them.
func TestStatsResumeTotals(t *testing.T) {
	s := NewStats(nil)
	s.SetTotal(300)
	s.AddAlreadyDone(120)
	tr := s.Begin()
	tr.Done(Outcome{CompletionTokens: 10, UsageKnown: true, FinishReason: "stop", Attempts: 1})
	snap := s.Snapshot()
	if snap.Planned() != 300 || snap.Completed() != 121 || snap.Total != 180 {
		t.Fatalf("planned %d completed %d total %d, want 300, 121, 180", snap.Planned(), snap.Completed(), snap.Total)
	}
	// Keys that failed before and are not asked again leave the run's
	// requests but stay in the job, and are not done.
	s.AddAlreadyFailed(30)
	snap = s.Snapshot()
	if snap.Planned() != 300 || snap.Completed() != 121 || snap.Total != 150 || snap.AlreadyFailed != 30 {
		t.Fatalf("planned %d completed %d total %d already failed %d, want 300, 121, 150, 30",
			snap.Planned(), snap.Completed(), snap.Total, snap.AlreadyFailed)
	}
}

// TestStatsCancelIsNotAnError: Ctrl-C cuts requests in flight; they are
// asked again on resume, so the progress line must not count them as errors.
func TestStatsCancelIsNotAnError(t *testing.T) {
	s := NewStats(nil)
	s.SetTotal(2)
	a, b := s.Begin(), s.Begin()
	a.Delta(5)
	a.Cancel()
	b.Fail("http_400")
	snap := s.Snapshot()
	if snap.InFlight != 0 || snap.Errors != 1 || snap.ErrorsByCause["http_400"] != 1 || snap.RunningTokens != 0 {
		t.Fatalf("in flight %d, errors %d (%v), running tokens %d; want 0, 1 (http_400), 0",
			snap.InFlight, snap.Errors, snap.ErrorsByCause, snap.RunningTokens)
	}
}

// TestStatsStopFreezesRates: the summary printed after the sink closed must
// report the run's rates, not rates diluted by the time spent closing.
func TestStatsStopFreezesRates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := NewStats(clock)
	s.SetTotal(1)
	tr := s.Begin()
	now = now.Add(10 * time.Second)
	tr.Done(Outcome{CompletionTokens: 1000, UsageKnown: true, FinishReason: "stop", Attempts: 1})
	s.Stop()
	now = now.Add(50 * time.Second) // closing the sink, printing...
	snap := s.Snapshot()
	if snap.Elapsed != 10*time.Second || snap.TokPerSec != 100 {
		t.Fatalf("after Stop: elapsed %v, %.1f tok/s; want 10s and 100 tok/s", snap.Elapsed, snap.TokPerSec)
	}
}

// TestEndpointStreamedCountsEveryDelta: each endpoint's Streamed counts the
// deltas of the attempts sent to it as they arrive, before any answer
// completes, a retried attempt's and a failed request's too (the server
// did that work), and each attempt's to its own endpoint.
func TestEndpointStreamedCountsEveryDelta(t *testing.T) {
	clk := newFakeClock()
	s := NewStats(clk.now)
	s.SetEndpoints([]string{"http://a", "http://b"})
	eps := s.EndpointLedgers(2)
	r := s.Begin()
	r.Delta(5) // before SendingTo: the run's count only
	r.SendingTo(eps[0])
	r.Delta(30)
	r.Retry("stream_cut")
	r.SendingTo(eps[1])
	r.Delta(12)
	f := s.Begin()
	f.SendingTo(eps[1])
	f.Delta(8)
	f.Fail("timeout")
	f.Delta(100) // after the end: counted nowhere
	checkI(t, "a.Streamed", eps[0].Streamed(), 30)
	checkI(t, "b.Streamed", eps[1].Streamed(), 20)
	snap := s.Snapshot()
	checkI(t, "snapshot a.StreamedTokens", snap.Endpoints[0].StreamedTokens, 30)
	checkI(t, "snapshot b.StreamedTokens", snap.Endpoints[1].StreamedTokens, 20)
	checkI(t, "b.Completed", snap.Endpoints[1].Completed, 0)
}

// A resume's first figures: what the directory held counts at once (the
// seed), and the producer's own count of the same keys, as it passes them,
// is never added to it; bad rows leave Total without touching it; once the
// producer has passed every row its count alone stands (a record outside
// the selection was in the seed).
func TestStatsSeedHeld(t *testing.T) {
	s := NewStats(newFakeClock().now)
	s.SetTotal(100)
	s.SeedHeld(60, 5)
	planned := int64(100)
	check := func(when string, done, failed, total int64) {
		t.Helper()
		snap := s.Snapshot()
		if snap.AlreadyDone != done || snap.AlreadyFailed != failed || snap.Total != total || snap.Planned() != planned {
			t.Errorf("%s: already done %d, failed %d, total %d, planned %d; want %d %d %d %d",
				when, snap.AlreadyDone, snap.AlreadyFailed, snap.Total, snap.Planned(), done, failed, total, planned)
		}
	}
	check("at open", 60, 5, 35)
	s.AddAlreadyDone(10) // the producer passed the first 10 done keys
	s.AddAlreadyFailed(5)
	check("10 done and the 5 failed passed", 60, 5, 35)
	s.AddBadRows(2, 2) // repeated rows are bad rows: out of Total, not done
	planned = 98
	check("2 bad rows", 60, 5, 33)
	s.AddAlreadyDone(49) // 59 of the 60 passed
	check("59 passed", 60, 5, 33)
	s.SettleHeld() // one record was outside the selection
	check("every row passed", 59, 5, 34)
}
