package runfiles

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
)

// TestHiddenStatusAndReport: while the pass runs, status.json is the
// run's final status in the pass's state with its block; at its end
// status.json and report.json carry the block, the run's figures
// unchanged, and the outcome the caller gives (here an interrupted pass
// after a run that was done).
func TestHiddenStatusAndReport(t *testing.T) {
	dir := t.TempDir()
	started := time.Date(2025, 6, 1, 11, 58, 0, 0, time.UTC)
	s := &StatusWriter{dir: dir, info: RunInfo{PID: 4242, StartedAt: started, OutputDir: dir}, cfg: ReportConfig{Model: "m"}}
	s.state.Store(StateRunning)
	if err := s.Hidden(HiddenStatesRecord{State: StateRunning}); err == nil {
		t.Error("a hidden status was written before the run's end")
	}
	rec := runstats.NewProgressRecord(goldenSnapshot(), nil)
	sum := runstats.Summary{Written: 400, Failed: 3, Skipped: 100}
	if err := s.Finish(rec, RunOutcome{State: StateDone, Summary: sum, EndedAt: started.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	running := HiddenStatesRecord{State: StateRunning, Units: 10, Kept: 3, KeptBefore: 2, ToExtract: 4, Failed: 1, Errors: 5, ProjectedBytes: 800, BytesKept: 500}
	if err := s.Hidden(running); err != nil {
		t.Fatal(err)
	}
	st := readStatus(t, filepath.Join(dir, StatusFile))
	if st.State != StateRunning || st.HiddenStates == nil || *st.HiddenStates != running || st.Done != rec.Done || st.PID != 4242 {
		t.Errorf("status.json during the pass: state %s, hidden %+v, done %d", st.State, st.HiddenStates, st.Done)
	}

	end := running
	end.State, end.Kept, end.ToExtract = StateInterrupted, 5, 2
	if err := s.FinishHidden(end, StateInterrupted, 130, errors.New("interrupted")); err != nil {
		t.Fatal(err)
	}
	st = readStatus(t, filepath.Join(dir, StatusFile))
	if st.State != StateInterrupted || st.HiddenStates == nil || *st.HiddenStates != end {
		t.Errorf("final status.json: state %s, hidden %+v", st.State, st.HiddenStates)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep ReportRecord
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Event != "report" || rep.ExitCode != 130 || rep.Error != "interrupted" || rep.State != StateInterrupted ||
		rep.Written != 400 || rep.Skipped != 100 || rep.HiddenStates == nil || *rep.HiddenStates != end || rep.Config.Model != "m" {
		t.Errorf("report.json after the pass: %s", b)
	}
}

func readStatus(t *testing.T, path string) StatusRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st StatusRecord
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st
}
