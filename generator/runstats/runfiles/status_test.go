package runfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/promscrape"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden status.json and report.json")

// goldenSnapshot sets every field the progress record reads, each to a
// value of its own, so a field renamed, moved or read from the wrong
// figure changes the golden files.
func goldenSnapshot() runstats.Snapshot {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return runstats.Snapshot{
		At: at, Elapsed: 90 * time.Second,
		Total: 900, AlreadyDone: 100, AlreadyFailed: 12, Done: 400, Errors: 3, InFlight: 64, Retries: 7,
		ServerDownSince:  at.Add(-30 * time.Second),
		ErrorsByCause:    map[string]int64{"http_400": 2, "timeout": 1},
		RetriesByCause:   map[string]int64{"http_429": 7},
		CompletionTokens: 123456, PromptTokens: 54321,
		ReqPerSec: 4.5, TokPerSec: 1371.7, PromptTokPerSec: 603.5,
		Last10s:       runstats.Throughput{ReqPerSec: 5.5, TokPerSec: 1500.25},
		Last60s:       runstats.Throughput{ReqPerSec: 4.75, TokPerSec: 1400.5},
		CompletionAvg: 308.64, CompletionP50: 250, CompletionP90: 700, CompletionMax: 2048,
		TruncatedShare: 0.0125,
		TTFTP50:        51200 * time.Microsecond, TTFTP90: 55400 * time.Microsecond,
		ITLP50: 2 * time.Millisecond, ITLP90: 3 * time.Millisecond,
		ExpectedCompletion: 320.5,
		ETA:                150 * time.Second, ETAKnown: true, ETAError: 12 * time.Second, Confidence: "high",
	}
}

func goldenRates() *promscrape.Rates {
	return &promscrape.Rates{Kind: promscrape.KindVLLM, Window: 10 * time.Second, GenTokPerSec: 1600.5, PromptTokPerSec: 700.25,
		Running: 64, Waiting: 3, HasKV: true, KVCacheUsage: 0.25, Preemptions: 1, HasPreemptions: true,
		HasSpec: true, AcceptanceRate: math.NaN(), MeanAcceptanceLength: 2.5}
}

// TestStatusFilesGolden pins the bytes of status.json and report.json:
// users' scripts read them, so field names, order and values must not
// change by accident.
func TestStatusFilesGolden(t *testing.T) {
	dir := t.TempDir()
	started := time.Date(2025, 6, 1, 11, 58, 0, 0, time.UTC)
	s := &StatusWriter{
		dir:  dir,
		info: RunInfo{PID: 4242, Hostname: "gpu-07", StartedAt: started, OutputDir: "/data/out/run"},
		cfg: ReportConfig{BaseURL: "http://user:xxxxx@gpu-07:8000/v1", Model: "mock-model", Dataset: "prompts.jsonl",
			Format: "messages", Limit: 1000, Shard: "1/4", Concurrency: 64, Samples: 2, MaxTokens: 2048,
			Stream: true, OutputFormat: "parquet"},
	}
	s.state.Store(StateRunning)
	rec := runstats.NewProgressRecord(goldenSnapshot(), goldenRates())
	if err := s.Heartbeat(rec); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join(dir, StatusFile), "status.running.golden.json")

	ended := started.Add(3 * time.Minute)
	sum := runstats.Summary{Written: 400, Failed: 3, Skipped: 100, BadRows: 5, Canceled: 2, Lost: 1}
	o := RunOutcome{ExitCode: 3, State: StateDone, Err: errors.New("3 requests failed for good (see out/errors)"), Summary: sum, EndedAt: ended}
	if err := s.Finish(rec, o); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join(dir, StatusFile), "status.done.golden.json")
	checkGolden(t, filepath.Join(dir, ReportFile), "report.golden.json")
}

func checkGolden(t *testing.T, path, golden string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join("testdata", golden)
	if *updateGolden {
		if err := os.WriteFile(want, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, w) {
		t.Errorf("%s differs from %s:\n%s\nwant\n%s", filepath.Base(path), want, got, w)
	}
}

func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return v
}

// A run's life in its files: running with who and where, draining after
// SetState, then the outcome the caller gives in both files; a leftover of
// a killed rewrite is removed, the files themselves are not.
func TestStatusWriterLife(t *testing.T) {
	dir := t.TempDir()
	started := time.Now().Add(-time.Minute)
	s := NewStatusWriter(dir, started, ReportConfig{Model: "m", Concurrency: 4}, nil)
	statusPath := filepath.Join(dir, StatusFile)
	if err := os.WriteFile(statusPath, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{filepath.Join(dir, "."+StatusFile+".12345.tmp"), filepath.Join(dir, "."+ReportFile+".9.tmp")}
	for _, p := range leftovers {
		if err := os.WriteFile(p, []byte(`{"sta`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	for _, p := range leftovers {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s still there (%v)", p, err)
		}
	}
	if _, err := os.Stat(statusPath); err != nil {
		t.Errorf("RemoveLeftovers removed %s: %v", StatusFile, err)
	}

	rec := runstats.NewProgressRecord(runstats.Snapshot{Total: 200, InFlight: 4}, nil)
	if err := s.Heartbeat(rec); err != nil {
		t.Fatal(err)
	}
	st := readJSON[StatusRecord](t, statusPath)
	if st.Event != "status" || st.State != StateRunning || st.PID != os.Getpid() || st.OutputDir != dir ||
		!st.StartedAt.Equal(started) || st.Total != 200 || st.InFlight != 4 {
		t.Errorf("running status = %+v", st)
	}
	s.SetState(StateDraining)
	if err := s.Heartbeat(rec); err != nil {
		t.Fatal(err)
	}
	if st := readJSON[StatusRecord](t, statusPath); st.State != StateDraining {
		t.Errorf("state after SetState = %q, want %q", st.State, StateDraining)
	}

	final := runstats.NewProgressRecord(runstats.Snapshot{Total: 200, Done: 37}, nil)
	o := RunOutcome{ExitCode: 130, State: StateInterrupted, Err: errors.New("interrupted after 37 new records"), Summary: runstats.Summary{Written: 37, Canceled: 4}}
	if err := s.Finish(final, o); err != nil {
		t.Fatal(err)
	}
	st = readJSON[StatusRecord](t, statusPath)
	rep := readJSON[ReportRecord](t, filepath.Join(dir, ReportFile))
	if st.State != StateInterrupted || st.Done != 37 || rep.State != StateInterrupted || rep.ExitCode != 130 ||
		!strings.Contains(rep.Error, "interrupted") || rep.Written != 37 || rep.Canceled != 4 || rep.InFlight != 0 ||
		rep.Event != "report" || rep.Config.Model != "m" || rep.EndedAt.Before(started) || rep.DurationS < 60 {
		t.Errorf("after Finish: status %+v\nreport %+v", st, rep)
	}
	if err := s.Finish(final, RunOutcome{State: StateDone}); err != nil {
		t.Fatal(err)
	}
	if rep := readJSON[ReportRecord](t, filepath.Join(dir, ReportFile)); rep.Error != "" || rep.ExitCode != 0 || rep.State != StateDone {
		t.Errorf("a success reported as %+v", rep)
	}
}
