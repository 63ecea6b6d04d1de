package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// testClock is the clock given to runstats.Stats so the figures in the
// lines are known exactly.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// driven runs a Reporter whose line ticks the test sends one by one. Each
// send returns once the Reporter has taken the tick, so the previous tick's
// output is complete; stop ends Run and waits for its final render.
type driven struct {
	ticks  chan time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func drive(r *Reporter, stats *runstats.Stats) *driven {
	d := &driven{ticks: make(chan time.Time), done: make(chan struct{})}
	r.ticks = func(time.Duration) (<-chan time.Time, func()) { return d.ticks, func() {} }
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { defer close(d.done); r.Run(ctx, stats) }()
	return d
}

func (d *driven) tick() { d.ticks <- time.Time{} }

// stop ends Run; the unbuffered send guarantees the last tick was handled
// before cancelling.
func (d *driven) stop() {
	d.cancel()
	<-d.done
}

// A 200-request ramp at 6000 tok/s, none finished after 5 s.
func rampStats() (*runstats.Stats, *testClock) {
	clk := &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	stats := runstats.NewStats(clk.now)
	stats.SetTotal(25000)
	trs := make([]*runstats.Tracker, 200)
	for i := range trs {
		trs[i] = stats.Begin()
	}
	for range 5 {
		for _, tr := range trs {
			tr.Delta(30)
		}
		clk.advance(time.Second)
	}
	return stats, clk
}

// progressHeadRe is how a plain line starts: its time, RFC 3339 in UTC.
var progressHeadRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ progress `)

// The share done is cut, never rounded up: 100.0% only when every key is
// done; a job of no key has none.
func TestProgressPercent(t *testing.T) {
	for _, tc := range []struct {
		done, planned int64
		want          string
	}{
		{0, 25000, "0.0%"}, {150, 25000, "0.6%"}, {9999, 10000, "99.9%"}, {10000, 10000, "100.0%"}, {0, 0, "--"},
	} {
		if got := Percent(tc.done, tc.planned); got != tc.want {
			t.Errorf("fmtPercent(%d, %d) = %q, want %q", tc.done, tc.planned, got, tc.want)
		}
	}
}

func TestFormatLineRamp(t *testing.T) {
	stats, _ := rampStats()
	got := Line(stats.Snapshot(), nil, nil)
	want := "2025-06-01T12:00:05Z progress 0/25000 (0.0%) (0 errors, 0 failed earlier) 0.0 req/s 6000 tok/s avg completion -- tok in flight 200 eta >10m20s" +
		" | 10s 6000 tok/s 0.0 req/s | 60s 6000 tok/s 0.0 req/s | retries 0"
	if got != want {
		t.Errorf("formatLine =\n%s\nwant\n%s", got, want)
	}
}

// TestFormatLineServerDown: while the server is away the line says so, so a
// person reading gen.log in the morning sees why nothing moved for an hour.
func TestFormatLineServerDown(t *testing.T) {
	stats, clk := rampStats()
	stats.SetServerDown(true, clk.now().Add(-3*time.Minute))
	snap := stats.Snapshot()
	if got := Line(snap, nil, nil); !strings.HasSuffix(got, " | server unreachable for 3m00s, waiting for it") {
		t.Errorf("formatLine while the server is down = %q", got)
	}
	if got := barLine(snap, nil, nil, 160); !strings.Contains(got, "server unreachable for 3m00s") {
		t.Errorf("bar while the server is down = %q", got)
	}
	stats.SetServerDown(false, time.Time{})
	if got := Line(stats.Snapshot(), nil, nil); strings.Contains(got, "unreachable") {
		t.Errorf("formatLine after the server came back = %q", got)
	}
}

func TestFormatLineWithServer(t *testing.T) {
	clk := &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	stats := runstats.NewStats(clk.now)
	stats.AddAlreadyDone(100)
	stats.SetTotal(50)
	for i := 1; i <= 40; i++ {
		tr := stats.Begin()
		tr.Done(runstats.Outcome{CompletionTokens: 500, UsageKnown: true})
	}
	tr := stats.Begin()
	tr.Fail("http_400")
	clk.advance(20 * time.Second)
	server := &promscrape.Rates{GenTokPerSec: 1234.4, Running: 9, Waiting: 1, HasKV: true, KVCacheUsage: 0.873,
		Preemptions: 2, HasPreemptions: true, HasSpec: true, AcceptanceRate: 0.72, MeanAcceptanceLength: 3.1, Window: 10 * time.Second}
	got := Line(stats.Snapshot(), server, nil)
	// 9 keys left × 500 tokens at 20000/20 s = 1000 tok/s: 4.5 s; the SE is 0
	// (all lengths equal), the rate's measured on 40 answers: ±4.5/sqrt(40).
	want := "2025-06-01T12:00:20Z progress 140/150 (93.3%) (1 errors, 0 failed earlier) 2.0 req/s 1000 tok/s avg completion 500 tok in flight 0 eta 5s ±1s" +
		" | 10s 0 tok/s 0.0 req/s | 60s 1000 tok/s 2.0 req/s | retries 0" +
		" | server 1234 tok/s running 9 waiting 1 kv 87% preemptions 2 spec acceptance 72% length 3.10"
	if got != want {
		t.Errorf("formatLine =\n%s\nwant\n%s", got, want)
	}
}

var escapes = regexp.MustCompile("[\r\x1b]")

// Not a terminal (nohup, a log file): exactly one plain line per interval,
// no carriage return, no escape code, and a final line at the end.
func TestReporterPlainLines(t *testing.T) {
	stats, clk := rampStats()
	var buf bytes.Buffer
	var statuses []runstats.ProgressRecord
	var finals []bool
	// Status runs inside each report, after the snapshot: advancing the
	// clock there puts exactly one second between consecutive lines.
	r := New(&buf, Options{Interval: time.Second, Status: func(rec runstats.ProgressRecord, final bool) {
		statuses = append(statuses, rec)
		finals = append(finals, final)
		clk.advance(time.Second)
	}})
	d := drive(r, stats)
	for range 3 {
		d.tick()
	}
	d.stop()

	out := buf.String()
	if escapes.MatchString(out) {
		t.Errorf("plain output has \\r or escape codes: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 3 ticks + 1 final:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if !progressHeadRe.MatchString(l) || !strings.Contains(l, " progress 0/25000 (0.0%) (0 errors, 0 failed earlier) ") {
			t.Errorf("line %q does not start like a progress line", l)
		}
	}
	// The clock moved 1 s between lines with no new token: 30000 tokens
	// over 5, 6, 7 s, then 8 s at the end.
	for i, want := range []string{"5000 tok/s", "4286 tok/s", "3750 tok/s"} {
		if !strings.Contains(lines[i+1], " "+want+" ") {
			t.Errorf("line %d = %q, want %s", i+1, lines[i+1], want)
		}
	}
	if len(statuses) != 4 {
		t.Fatalf("Status called %d times, want 4", len(statuses))
	}
	if !slices.Equal(finals, []bool{false, false, false, true}) {
		t.Errorf("final flags = %v, want only the last one set", finals)
	}
	rec := statuses[3]
	if rec.Event != "progress" || rec.Total != 25000 || rec.InFlight != 200 || rec.TokPerS != 3750 || rec.ETAS == nil {
		t.Errorf("status record = %+v", rec)
	}
}

func TestReporterQuietAndJSON(t *testing.T) {
	t.Run("quiet", func(t *testing.T) {
		stats, _ := rampStats()
		var buf bytes.Buffer
		calls := 0
		r := New(&buf, Options{Quiet: true, TTY: true, Status: func(runstats.ProgressRecord, bool) { calls++ },
			Scrape: func(context.Context) (promscrape.Sample, error) { return promscrape.Sample{}, errors.New("down") }})
		d := drive(r, stats)
		d.tick()
		d.tick()
		d.stop()
		if buf.Len() != 0 {
			t.Errorf("quiet wrote %q", buf.String())
		}
		if calls != 3 {
			t.Errorf("Status called %d times, want 3", calls)
		}
		if s := r.Summary(stats, "done"); !strings.HasPrefix(s, "done 0/25000 in 5s, 0 errors, 0 retries\n") {
			t.Errorf("Summary = %q", s)
		}
	})
	t.Run("json", func(t *testing.T) {
		stats, _ := rampStats()
		var buf bytes.Buffer
		r := New(&buf, Options{JSON: true, TTY: true})
		d := drive(r, stats)
		d.tick()
		d.stop()
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
		}
		for _, l := range lines {
			var rec runstats.ProgressRecord
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("line is not JSON: %v\n%s", err, l)
			}
			if rec.TokPerS != 6000 || rec.InFlight != 200 || rec.ETAConfidence != "low" {
				t.Errorf("record = %+v", rec)
			}
		}
	})
}

// A failing scrape is said once, then retried quietly; when it works
// again the server's tok/s comes from consecutive samples.
func TestReporterServerView(t *testing.T) {
	stats, _ := rampStats()
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	results := []func() (promscrape.Sample, error){
		func() (promscrape.Sample, error) {
			return promscrape.Sample{}, errors.New("scrape http://gpu:8000/metrics: connection refused")
		},
		func() (promscrape.Sample, error) {
			return promscrape.Sample{}, errors.New("scrape http://gpu:8000/metrics: connection refused")
		},
		func() (promscrape.Sample, error) {
			return promscrape.Sample{At: base, GenerationTokens: 1000, Running: 3, HasPreemptions: true}, nil
		},
		func() (promscrape.Sample, error) {
			return promscrape.Sample{At: base.Add(10 * time.Second), GenerationTokens: 21000, Running: 180, Waiting: 20, HasKV: true, KVCacheUsage: 0.5, HasPreemptions: true}, nil
		},
	}
	calls := 0
	scrape := func(context.Context) (promscrape.Sample, error) {
		f := results[min(calls, len(results)-1)]
		calls++
		return f()
	}
	var buf bytes.Buffer
	d := drive(New(&buf, Options{Scrape: scrape}), stats)
	d.tick() // second failure: silent
	d.tick() // first sample: no rate yet
	d.tick() // rate
	d.stop()
	out := buf.String()
	if n := strings.Count(out, "connection refused"); n != 1 {
		t.Errorf("failure reported %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "metrics: scrape http://gpu:8000/metrics: connection refused; not showing the server's view") {
		t.Errorf("failure message missing:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	figures := "| server 2000 tok/s running 180 waiting 20 kv 50% preemptions 0"
	if tick := lines[len(lines)-2]; !strings.HasSuffix(tick, figures) {
		t.Errorf("the last tick's line = %q, want the server's 2000 tok/s", tick)
	}
	// The final line comes with no scrape since: the same figures, marked
	// old (the sample's clock is ahead of the run's here: 0s).
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, figures+" (0s old)") {
		t.Errorf("final line = %q, want the same figures marked old", last)
	}
}

// On a terminal the bar is drawn; the final render ends the line.
func TestReporterTTY(t *testing.T) {
	stats, _ := rampStats()
	var buf bytes.Buffer
	d := drive(New(&buf, Options{TTY: true}), stats)
	d.tick()
	d.stop()
	out := buf.String()
	// progressbar/v3 draws the percentage and the bar after the fields.
	if !strings.Contains(out, "0/25000 10s 6.0k tok/s") || !strings.Contains(out, "0% |") || !strings.Contains(out, "\x1b[") || !strings.HasSuffix(out, "\n") {
		t.Errorf("bar output = %q", out)
	}
}

func TestSummary(t *testing.T) {
	clk := &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	stats := runstats.NewStats(clk.now)
	stats.AddAlreadyDone(10)
	stats.SetTotal(3)
	for _, n := range []int{100, 300} {
		tr := stats.Begin()
		tr.Retry("http_429")
		tr.Done(runstats.Outcome{CompletionTokens: n, UsageKnown: true, PromptTokens: 50, FinishReason: "stop",
			TTFT: 200 * time.Millisecond, Latency: 200*time.Millisecond + time.Duration(n-1)*20*time.Millisecond, Deltas: n})
	}
	stats.Begin().Fail("timeout")
	clk.advance(100 * time.Second)
	got := New(&bytes.Buffer{}, Options{}).Summary(stats, "incomplete")
	want := "incomplete 12/13 in 1m40s (10 before this run), 1 errors, 2 retries\n" +
		"  errors      timeout 1\n" +
		"  retries     http_429 2\n" +
		"  throughput  0.020 req/s     4 tok/s    1 prompt tok/s\n" +
		"  completion  avg 200         p50 100    p90 300       max 300 tok  truncated 0.0%\n" +
		"  latency     ttft p50 200ms  p90 200ms  itl p50 20ms  p90 20ms\n"
	if got != want {
		t.Errorf("Summary =\n%s\nwant\n%s", got, want)
	}
}

// TestSummaryNothingAsked: a rerun over a finished directory asks nothing;
// its summary is one line, not a table of zeros, and the line shows the
// job's size rather than "?".
func TestSummaryNothingAsked(t *testing.T) {
	stats := runstats.NewStats(nil)
	stats.SetTotal(300)
	stats.AddAlreadyDone(300)
	stats.Stop()
	r := New(&bytes.Buffer{}, Options{Interval: time.Second})
	got := r.Summary(stats, "done")
	if want := "done 300/300 in 0s (300 before this run), 0 errors, 0 retries\n"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if line := Line(stats.Snapshot(), nil, nil); !strings.Contains(line, " progress 300/300 (100.0%) ") {
		t.Errorf("formatLine = %q, want it to start with progress 300/300", line)
	}
}

func TestFmtLatency(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{12345 * time.Millisecond, "12.3s"},
		{1234 * time.Millisecond, "1.23s"},
		{51234 * time.Microsecond, "51.2ms"},
		{450 * time.Microsecond, "450µs"},
		{0, "0s"},
	} {
		if got := fmtLatency(tt.d); got != tt.want {
			t.Errorf("fmtLatency(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// barSnap is a run a third of the way through, as the bar sees it.
func barSnap() runstats.Snapshot {
	return runstats.Snapshot{
		At: time.Date(2025, 6, 1, 12, 1, 0, 0, time.UTC), Elapsed: time.Minute,
		Total: 2000, Done: 644, Errors: 2, InFlight: 37, Retries: 5,
		TokPerSec: 8713, ReqPerSec: 26.0, CompletionAvg: 288,
		Last10s: runstats.Throughput{TokPerSec: 12820, ReqPerSec: 40.6},
		Last60s: runstats.Throughput{TokPerSec: 8713, ReqPerSec: 26.0},
		ETA:     3*time.Minute + 12*time.Second, ETAKnown: true, ETAError: 20 * time.Second, Confidence: "high",
	}
}

// TestBarLineWidths: the bar keeps what matters most when the terminal is
// narrow (done/total, the tok/s with its unit and window, the ETA; then
// req/s, in flight, errors, ...), never cuts a field, and its rates say
// they are the last 10 s, not the run's (which the summary gives).
func TestBarLineWidths(t *testing.T) {
	server := &promscrape.Rates{GenTokPerSec: 12790}
	for _, tc := range []struct {
		width int
		want  string
	}{
		{40, "644/2000 10s 12.8k tok/s eta 3m12s ±20s"},
		// "37 in flight" does not fit after req/s: left out whole, and
		// the smaller fields after it still get their chance.
		{60, "644/2000 10s 12.8k tok/s 40.6 req/s 2 err eta 3m12s ±20s"},
		// The percentage and the bar are progressbar/v3's, drawn beside.
		{100, "644/2000 10s 12.8k tok/s 40.6 req/s 37 in flight 2 err eta 3m12s ±20s | server 12.8k tok/s"},
		{160, "644/2000 10s 12.8k tok/s 40.6 req/s 37 in flight 2 err 5 retries avg 288 tok eta 3m12s ±20s | server 12.8k tok/s"},
	} {
		got := barLine(barSnap(), server, nil, tc.width)
		if got != tc.want {
			t.Errorf("width %d:\n got %q\nwant %q", tc.width, got, tc.want)
		}
		if n := len([]rune(got)); n >= tc.width {
			t.Errorf("width %d: the line has %d runes", tc.width, n)
		}
	}
}

// TestReporterDraining: after the first signal the job's ETA means nothing
// (no new request starts): the line and the bar say what the drain waits
// for and how much of shutdown.grace is left, by the stats' clock.
func TestReporterDraining(t *testing.T) {
	stats, clk := rampStats()
	var buf bytes.Buffer
	rep := New(&buf, Options{})
	rep.Draining(clk.now(), 2*time.Minute)
	clk.advance(48 * time.Second)
	d := drive(rep, stats)
	d.stop() // one line: the final one
	want := " in flight 200 draining: 200 in flight, 1m12s of grace left | 10s "
	if l := buf.String(); !strings.Contains(l, want) || strings.Contains(l, "eta") {
		t.Errorf("draining line = %q, want %q and no eta", l, want)
	}
	over := &drainState{since: clk.now().Add(-5 * time.Minute), grace: 2 * time.Minute}
	if l := Line(stats.Snapshot(), nil, over); !strings.Contains(l, " draining: 200 in flight, 0s of grace left |") {
		t.Errorf("draining past the grace = %q, want 0s left", l)
	}

	snap := barSnap()
	drain := &drainState{since: snap.At.Add(-48 * time.Second), grace: 2 * time.Minute}
	for _, tc := range []struct {
		width int
		want  string
	}{
		{40, "644/2000 2 err draining: 37, 1m12s left"},
		{100, "644/2000 10s 12.8k tok/s 40.6 req/s 37 in flight 2 err draining: 37 in flight, 1m12s of grace left"},
	} {
		if got := barLine(snap, nil, drain, tc.width); got != tc.want {
			t.Errorf("bar at %d while draining:\n got %q\nwant %q", tc.width, got, tc.want)
		}
	}
}

// serverFiguresRe finds the server's scraped figures in a line.
var serverFiguresRe = regexp.MustCompile(`\| server \d`)

// TestReporterServerFiguresAcrossOutage: the server's figures taken before
// an outage began are not shown beside "unreachable", nor after it (the
// first rates after it are measured from a sample of the server that went
// away); an outage that began and ended between two lines hides them too.
// The fake scrape moves the clock and the outage itself, in the Reporter's
// goroutine, so each line's state is exact.
func TestReporterServerFiguresAcrossOutage(t *testing.T) {
	stats, clk := rampStats()
	sample := func(gen float64) (promscrape.Sample, error) {
		return promscrape.Sample{At: clk.now(), GenerationTokens: gen, Running: 5}, nil
	}
	steps := []func() (promscrape.Sample, error){
		func() (promscrape.Sample, error) { return sample(0) }, // the baseline, when Run starts
		func() (promscrape.Sample, error) { clk.advance(10 * time.Second); return sample(20000) },
		func() (promscrape.Sample, error) {
			clk.advance(5 * time.Second)
			stats.SetServerDown(true, clk.now())
			clk.advance(12 * time.Second)
			return promscrape.Sample{}, errors.New("connection refused")
		},
		func() (promscrape.Sample, error) {
			clk.advance(10 * time.Second)
			stats.SetServerDown(false, time.Time{})
			return sample(500) // restarted: its counters began again
		},
		func() (promscrape.Sample, error) { clk.advance(10 * time.Second); return sample(10500) },
		func() (promscrape.Sample, error) {
			clk.advance(3 * time.Second)
			stats.SetServerDown(true, clk.now())
			clk.advance(2 * time.Second)
			stats.SetServerDown(false, time.Time{})
			clk.advance(5 * time.Second)
			return sample(20500)
		},
	}
	calls := 0
	scrape := func(context.Context) (promscrape.Sample, error) {
		f := steps[min(calls, len(steps)-1)]
		calls++
		return f()
	}
	var buf bytes.Buffer
	rep := New(&buf, Options{Scrape: scrape})
	d := drive(rep, stats)
	for range len(steps) - 1 {
		d.tick()
	}
	d.stop()
	var lines []string
	for l := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(l, " progress ") {
			lines = append(lines, l)
		}
	}
	for i, want := range []struct{ server, down string }{
		{"| server 2000 tok/s", ""},
		{"", "| server unreachable for 12s"},
		{"", ""}, // back: the rates span the outage
		{"| server 1000 tok/s", ""},
		{"", ""}, // a short outage between two lines
		{"", ""}, // the final line
	} {
		if i >= len(lines) {
			t.Fatalf("%d progress lines, want 6:\n%s", len(lines), buf.String())
		}
		l := lines[i]
		if want.server == "" && serverFiguresRe.MatchString(l) {
			t.Errorf("line %d shows the server's figures from before an outage: %q", i+1, l)
		}
		if want.server != "" && !strings.Contains(l, want.server) {
			t.Errorf("line %d = %q, want %q", i+1, l, want.server)
		}
		if (want.down != "") != strings.Contains(l, "unreachable") || !strings.Contains(l, want.down) {
			t.Errorf("line %d = %q, want %q", i+1, l, want.down)
		}
	}
	if got := rep.Server(); got != nil {
		t.Errorf("Server() after the run = %+v, want none: its window began before the last outage", got)
	}
}

// TestETAInAnOutage: while the server is down the line says so, not an ETA
// that grows as the rate falls.
func TestETAInAnOutage(t *testing.T) {
	if got := fmtETA(runstats.Snapshot{ETAUnknown: "outage", Done: 3}); got != "-- (outage)" {
		t.Errorf("fmtETA in an outage = %q, want \"-- (outage)\"", got)
	}
}

// TestProgressNamesEndpoints: with several endpoints the line and the bar
// say how many are up and name a replica that is away (password masked,
// as the snapshot holds it); with one endpoint nothing changes.
func TestProgressNamesEndpoints(t *testing.T) {
	stats, clk := rampStats()
	snap := stats.Snapshot()
	one := Line(snap, nil, nil)
	if strings.Contains(one, "eps") {
		t.Errorf("one endpoint: the line speaks of endpoints: %q", one)
	}
	snap.Endpoints = []runstats.EndpointSnapshot{
		{URL: "http://a:8000/v1", State: runstats.EndpointUp},
		{URL: "http://b:8000/v1", State: runstats.EndpointUp},
		{URL: "http://u:xxxxx@c:8000/v1", State: runstats.EndpointUp},
	}
	if got := Line(snap, nil, nil); !strings.HasSuffix(got, " | eps 3/3 up") {
		t.Errorf("three up: line %q, want it to end in \" | eps 3/3 up\"", got)
	}
	snap.Endpoints[2].State = runstats.EndpointProbing
	snap.Endpoints[2].DownSince = clk.now().Add(-12 * time.Second)
	want := "eps 2/3 up, down: http://u:xxxxx@c:8000/v1 12s"
	if got := Line(snap, nil, nil); !strings.HasSuffix(got, " | "+want) {
		t.Errorf("one down: line %q, want it to end in %q", got, want)
	}
	if got := barLine(snap, nil, nil, 160); !strings.Contains(got, want) {
		t.Errorf("one down, wide bar %q: want %q in it", got, want)
	}
	// Narrow: the short form, before the less important fields.
	if got := barLine(snap, nil, nil, 60); !strings.Contains(got, "eps 2/3 up") {
		t.Errorf("one down, narrow bar %q: want \"eps 2/3 up\" in it", got)
	}
	// Taken out for its answers: the line says why.
	snap.Endpoints[2].Reason = "20 of the last 20 attempts failed (http_500)"
	want = "eps 2/3 up, down: http://u:xxxxx@c:8000/v1 12s (20 of the last 20 attempts failed (http_500))"
	if got := Line(snap, nil, nil); !strings.HasSuffix(got, " | "+want) {
		t.Errorf("one taken out: line %q, want it to end in %q", got, want)
	}
}

func TestReporterSumsEndpointServers(t *testing.T) {
	stats, _ := rampStats()
	stats.SetEndpoints([]string{"http://a:8000/v1", "http://b:8000/v1"})
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	replica := func(tokPerTenSec, running float64, kv float64) func(context.Context) (promscrape.Sample, error) {
		calls := 0
		return func(context.Context) (promscrape.Sample, error) {
			calls++
			at := base.Add(time.Duration(calls) * 10 * time.Second)
			return promscrape.Sample{At: at, GenerationTokens: float64(calls) * tokPerTenSec, Running: running, HasKV: true, KVCacheUsage: kv, HasPreemptions: true}, nil
		}
	}
	var status []runstats.ProgressRecord
	var buf bytes.Buffer
	rep := New(&buf, Options{
		ScrapeEach: []func(context.Context) (promscrape.Sample, error){replica(10000, 60, 0.25), replica(30000, 100, 0.75)},
		Status:     func(rec runstats.ProgressRecord, _ bool) { status = append(status, rec) },
	})
	d := drive(rep, stats)
	d.tick() // the second sample of each: rates
	d.stop()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "| server 4000 tok/s running 160 waiting 0 kv 50% preemptions 0") {
		t.Errorf("last line = %q, want the sum: 4000 tok/s, running 160, kv 50%%", last)
	}
	rec := status[len(status)-1]
	if rec.Server == nil || rec.Server.GenTokPerS != 4000 {
		t.Fatalf("record's server = %+v, want 4000 tok/s", rec.Server)
	}
	if len(rec.Endpoints) != 2 {
		t.Fatalf("record lists %d endpoints, want 2", len(rec.Endpoints))
	}
	for i, want := range []float64{1000, 3000} {
		if s := rec.Endpoints[i].Server; s == nil || s.GenTokPerS != want || s.URL != "" {
			t.Errorf("endpoint %d server = %+v, want %v tok/s", i+1, s, want)
		}
	}
	js, err := json.Marshal(rep.Record(stats.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"endpoints":[{"url":"http://a:8000/v1","state":"up"`) {
		t.Errorf("final record = %s, want each endpoint with its url and state", js)
	}
}

func TestReporterLeavesOutAReplicaThatIsDown(t *testing.T) {
	stats, _ := rampStats()
	stats.SetEndpoints([]string{"http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"})
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	replica := func(tokPerTenSec float64, diesAfter int) func(context.Context) (promscrape.Sample, error) {
		calls := 0
		return func(context.Context) (promscrape.Sample, error) {
			calls++
			if diesAfter > 0 && calls > diesAfter {
				return promscrape.Sample{}, errors.New("dial tcp: connection refused")
			}
			at := base.Add(time.Duration(calls) * 10 * time.Second)
			return promscrape.Sample{At: at, GenerationTokens: float64(calls) * tokPerTenSec, Running: 50}, nil
		}
	}
	var status []runstats.ProgressRecord
	var buf bytes.Buffer
	rep := New(&buf, Options{
		ScrapeEach: []func(context.Context) (promscrape.Sample, error){replica(10000, 0), replica(20000, 0), replica(30000, 2)},
		Status:     func(rec runstats.ProgressRecord, _ bool) { status = append(status, rec) },
	})
	d := drive(rep, stats)
	d.tick() // every replica's second sample: 1000 + 2000 + 3000 tok/s
	d.tick() // c is gone
	d.tick() // received only once the tick before is handled
	d.stop()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "| server 3000 tok/s running 100 ") || !strings.Contains(last, "(2 of 3 replicas)") {
		t.Errorf("last line = %q, want the two live replicas summed (3000 tok/s, running 100) and said: 2 of 3", last)
	}
	rec := status[len(status)-1]
	if rec.Server == nil || rec.Server.GenTokPerS != 3000 || rec.Server.ReplicasSummed != 2 || rec.Server.Replicas != 3 {
		t.Fatalf("record's server = %+v, want 3000 tok/s from 2 of 3 replicas", rec.Server)
	}
	if s := rec.Endpoints[2].Server; s != nil {
		t.Errorf("the gone replica's server = %+v, want none (its last rates are of a server that is gone)", s)
	}
}

// With generation.turns: all req/s counts keys while the servers take a
// request a turn: the line names both (issue 41), and says nothing extra
// with one turn a key.
func TestLineNamesKeysAndRequests(t *testing.T) {
	for _, turns := range []int{1, 3} {
		clk := &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
		stats := runstats.NewStats(clk.now)
		stats.SetTotal(100)
		stats.SetEndpoints([]string{"http://a"})
		ep := stats.EndpointLedgers(1)[0]
		for range 20 {
			tr := stats.Begin()
			tr.SendingTo(ep)
			for range turns {
				ep.Ended(clk.now(), clk.now(), true, true, 10)
				tr.TurnDone()
			}
			tr.Done(runstats.Outcome{CompletionTokens: 10 * turns, UsageKnown: true})
		}
		clk.advance(10 * time.Second)
		snap := stats.Snapshot()
		line := Line(snap, nil, nil)
		rec := runstats.NewProgressRecord(snap, nil)
		if turns == 1 {
			if strings.Contains(line, "requests/s") || rec.RequestsPerS != nil {
				t.Errorf("one turn a key: line %q, requests_per_s %v; want neither", line, rec.RequestsPerS)
			}
			continue
		}
		// 20 keys in 10 s, 60 requests.
		if !strings.Contains(line, " 2.0 req/s ") || !strings.Contains(line, " | 6.0 requests/s, every turn (req/s counts keys) | ") {
			t.Errorf("three turns a key: line %q, want 2.0 req/s and 6.0 requests/s named", line)
		}
		if rec.RequestsPerS == nil || *rec.RequestsPerS != 6 || rec.ReqPerS != 2 {
			t.Errorf("record: req_per_s %v, requests_per_s %v; want 2 and 6", rec.ReqPerS, rec.RequestsPerS)
		}
	}
}
