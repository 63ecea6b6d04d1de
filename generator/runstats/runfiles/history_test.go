package runfiles

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
)

// readHistory decodes every line of dir's history; a line that does not
// decode fails the test.
func readHistory(t *testing.T, dir string) []HistoryRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end in a newline", HistoryFile)
	}
	var out []HistoryRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r HistoryRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s:%d: %v", HistoryFile, n, err)
		}
		out = append(out, r)
	}
	return out
}

// TestHistoryHoldsEveryStatus: each status.json a run writes (heartbeats
// and the final one) is a line of history.jsonl, with the concurrency the
// run was given, and a second run of the directory appends after the
// first.
func TestHistoryHoldsEveryStatus(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for run := range 2 {
		s := NewStatusWriter(dir, t0.Add(time.Duration(run)*time.Hour), ReportConfig{Concurrency: 8 * (run + 1)}, nil)
		for i := range 3 {
			snap := runstats.Snapshot{At: t0.Add(time.Duration(run)*time.Hour + time.Duration(i)*time.Second), Total: 10, Done: int64(i), InFlight: int64(i + 1)}
			if err := s.Heartbeat(runstats.NewProgressRecord(snap, nil)); err != nil {
				t.Fatal(err)
			}
			got := readHistory(t, dir)
			last := got[len(got)-1]
			st := readJSON[StatusRecord](t, filepath.Join(dir, StatusFile))
			lb, _ := json.Marshal(last.StatusRecord)
			sb, _ := json.Marshal(st)
			if !bytes.Equal(lb, sb) {
				t.Fatalf("run %d heartbeat %d: history's last line\n%s\nis not status.json\n%s", run, i, lb, sb)
			}
			if last.Concurrency != 8*(run+1) {
				t.Errorf("concurrency %d, want %d", last.Concurrency, 8*(run+1))
			}
		}
		final := runstats.NewProgressRecord(runstats.Snapshot{At: t0.Add(time.Duration(run)*time.Hour + time.Minute), Total: 10, Done: 5}, nil)
		if err := s.Finish(final, RunOutcome{State: StateInterrupted}); err != nil {
			t.Fatal(err)
		}
	}
	got := readHistory(t, dir)
	if len(got) != 8 {
		t.Fatalf("%d lines, want 8 (two runs of three heartbeats and a final status)", len(got))
	}
	for i, r := range got {
		run := i / 4
		if !r.StartedAt.Equal(t0.Add(time.Duration(run) * time.Hour)) {
			t.Errorf("line %d: started_at %v, want run %d's", i+1, r.StartedAt, run)
		}
	}
	if got[3].State != StateInterrupted || got[7].State != StateInterrupted || got[7].Done != 5 {
		t.Errorf("the final lines: %+v / %+v", got[3].StatusRecord, got[7].StatusRecord)
	}
}

// TestHistoryCutsATornLine: a kill in the middle of an append leaves a
// torn last line; the next run's first append cuts it instead of gluing
// its line to it.
func TestHistoryCutsATornLine(t *testing.T) {
	dir := t.TempDir()
	h := NewHistory(dir)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range 2 {
		if err := h.Append(historyAt(t0, i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, HistoryFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"event":"status","state":"runn`); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	h = NewHistory(dir) // the next run
	if err := h.Append(historyAt(t0, 2, 1)); err != nil {
		t.Fatal(err)
	}
	got := readHistory(t, dir)
	if len(got) != 3 || got[2].Done != 2 {
		t.Fatalf("after a torn line: %d lines, last %+v", len(got), got[len(got)-1].StatusRecord)
	}
}

// historyAt is the i-th heartbeat, 10 s apart, of run (an hour apart).
func historyAt(t0 time.Time, i, run int) HistoryRecord {
	at := t0.Add(time.Duration(run)*time.Hour + time.Duration(i)*10*time.Second)
	rec := HistoryRecord{Concurrency: 64}
	rec.Event, rec.State = "status", StateRunning
	rec.StartedAt = t0.Add(time.Duration(run) * time.Hour)
	rec.ProgressRecord = runstats.NewProgressRecord(runstats.Snapshot{At: at, Total: 1 << 30, Done: int64(i), InFlight: 64,
		ErrorsByCause: map[string]int64{"timeout": int64(i / 100)}}, nil)
	return rec
}

// TestHistoryBounded: over many appends in three runs, one with a server
// outage, the file never holds more than its bound; the newest lines are
// all there, in order; every run's first and last line and the outage's
// start survive the thinning; the older lines are spread over the whole
// span; and a compaction happens at most once every old-1 appends.
func TestHistoryBounded(t *testing.T) {
	dir := t.TempDir()
	h := NewHistory(dir)
	h.recent, h.old, h.max = 64, 32, 128
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	type key struct{ run, i int }
	var want []key // what must survive
	var appended []key
	compactions, size := 0, int64(0)
	perRun := []int{900, 1500, 2600}
	outageAt := 700 // in run 1
	for run, n := range perRun {
		for i := range n {
			rec := historyAt(t0, i, run)
			if run == 1 && i >= outageAt && i < outageAt+20 {
				down := t0.Add(time.Hour + time.Duration(outageAt)*10*time.Second)
				rec.ServerDownSince = &down
			}
			before := len(h.lines)
			if err := h.Append(rec); err != nil {
				t.Fatal(err)
			}
			if len(h.lines) < before {
				compactions++
			}
			if len(h.lines) >= h.max {
				t.Fatalf("%d lines after an append, bound %d", len(h.lines), h.max)
			}
			size = max(size, h.size)
			appended = append(appended, key{run, i})
			if i == 0 || i == n-1 || (run == 1 && (i == outageAt || i == outageAt+20)) {
				want = append(want, key{run, i})
			}
		}
	}
	if compactions > len(appended)/(h.old-1) {
		t.Errorf("%d compactions for %d appends: more than one every %d appends", compactions, len(appended), h.old-1)
	}
	got := readHistory(t, dir)
	if len(got) != len(h.lines) {
		t.Fatalf("file holds %d lines, the writer counts %d", len(got), len(h.lines))
	}
	keys := make([]key, len(got))
	for i, r := range got {
		run := int(r.StartedAt.Sub(t0) / time.Hour)
		keys[i] = key{run, int(r.Done)}
	}
	if !slices.IsSortedFunc(keys, func(a, b key) int {
		if a.run != b.run {
			return a.run - b.run
		}
		return a.i - b.i
	}) {
		t.Errorf("lines out of order: %v", keys)
	}
	if tail := appended[len(appended)-h.recent:]; !slices.Equal(keys[len(keys)-h.recent:], tail) {
		t.Errorf("the newest %d lines are not all there", h.recent)
	}
	for _, w := range want {
		if !slices.Contains(keys, w) {
			t.Errorf("run %d line %d (a run's end or the outage's) was thinned away", w.run, w.i)
		}
	}
	// The older lines cover the whole span: no gap between two of them is
	// more than a tenth of it.
	old := got[:len(got)-h.recent]
	span := old[len(old)-1].Time.Sub(old[0].Time)
	for i := 1; i < len(old); i++ {
		if gap := old[i].Time.Sub(old[i-1].Time); gap > span/10 && old[i].StartedAt.Equal(old[i-1].StartedAt) {
			t.Errorf("a gap of %v in %v between lines %d and %d", gap, span, i, i+1)
		}
	}
	t.Logf("%d appends: %d lines kept, %d compactions, largest file %d bytes", len(appended), len(got), compactions, size)
}

// TestHistoryDayBound: a day of heartbeats every 10 s (8640 lines as
// written, ~6 MB; a week would be 90 MB) stays within historyMax lines and
// a few MiB with the real bounds. The bound is in lines, so a week's file is
// no larger (TestHistoryBounded runs many compactions).
func TestHistoryDayBound(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	h := NewHistory(dir)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	const day = 24 * 360
	for i := range day {
		if err := h.Append(historyAt(t0, i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	got := readHistory(t, dir)
	if len(got) >= historyMax || st.Size() > 8<<20 {
		t.Errorf("after a day: %d lines (bound %d), %d bytes", len(got), historyMax, st.Size())
	}
	if first := got[0]; first.Done != 0 {
		t.Errorf("the run's first line was thinned away: the oldest is heartbeat %d", first.Done)
	}
	t.Logf("a day at 10 s: %d lines, %d bytes", len(got), st.Size())
}
