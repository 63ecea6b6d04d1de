package main

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/internal/promscrape"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden status.json and report.json")

// goldenSnapshot sets every field the progress record reads, each to a
// value of its own, so a field renamed, moved or read from the wrong
// figure changes the golden files.
func goldenSnapshot() generator.Snapshot {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return generator.Snapshot{
		At: at, Elapsed: 90 * time.Second,
		Total: 900, AlreadyDone: 100, Done: 400, Errors: 3, InFlight: 64, Retries: 7,
		ServerDownSince:  at.Add(-30 * time.Second),
		ErrorsByCause:    map[string]int64{"http_400": 2, "timeout": 1},
		RetriesByCause:   map[string]int64{"http_429": 7},
		CompletionTokens: 123456, PromptTokens: 54321,
		ReqPerSec: 4.5, TokPerSec: 1371.7, PromptTokPerSec: 603.5,
		Last10s:       generator.Rates{ReqPerSec: 5.5, TokPerSec: 1500.25},
		Last60s:       generator.Rates{ReqPerSec: 4.75, TokPerSec: 1400.5},
		CompletionAvg: 308.64, CompletionP50: 250, CompletionP90: 700, CompletionMax: 2048,
		TruncatedShare: 0.0125,
		TTFTP50:        51200 * time.Microsecond, TTFTP90: 55400 * time.Microsecond,
		ITLP50: 2 * time.Millisecond, ITLP90: 3 * time.Millisecond,
		ExpectedCompletion: 320.5,
		ETA:                150 * time.Second, ETAKnown: true, ETAError: 12 * time.Second, Confidence: "high",
	}
}

func goldenRates() *promscrape.Rates {
	return &promscrape.Rates{Window: 10 * time.Second, GenTokPerSec: 1600.5, PromptTokPerSec: 700.25,
		Running: 64, Waiting: 3, HasKV: true, KVCacheUsage: 0.25, Preemptions: 1,
		HasSpec: true, AcceptanceRate: math.NaN(), MeanAcceptanceLength: 2.5}
}

// TestStatusFilesGolden pins the bytes of status.json and report.json:
// users' scripts read them, so field names, order and values must not
// change by accident.
func TestStatusFilesGolden(t *testing.T) {
	dir := t.TempDir()
	started := time.Date(2025, 6, 1, 11, 58, 0, 0, time.UTC)
	s := &runStatus{
		dir:  dir,
		info: runInfo{PID: 4242, Hostname: "gpu-07", StartedAt: started, OutputDir: "/data/out/run"},
		cfg: reportConfig{BaseURL: "http://user:xxxxx@gpu-07:8000/v1", Model: "mock-model", Dataset: "prompts.jsonl",
			Format: "messages", Limit: 1000, Shard: "1/4", Concurrency: 64, Samples: 2, MaxTokens: 2048,
			Stream: true, OutputFormat: "parquet"},
	}
	s.state.Store(stateRunning)
	rec := generator.NewProgressRecord(goldenSnapshot(), goldenRates())
	if err := s.Heartbeat(rec); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join(dir, statusFile), "status.running.golden.json")

	ended := started.Add(3 * time.Minute)
	err := &exitError{code: exitIncomplete, err: errors.New("3 requests failed for good (see out/errors)")}
	sum := generator.Summary{Written: 400, Failed: 3, Skipped: 100, Canceled: 2}
	if err := s.Finish(rec, runOutcome{Err: err, Summary: sum, EndedAt: ended}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join(dir, statusFile), "status.done.golden.json")
	checkGolden(t, filepath.Join(dir, reportFile), "report.golden.json")
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

// The config summary of report.json says what the configuration says, the
// model as resolved and any password in the URL masked.
func TestReportConfigOfConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Endpoint.BaseURL = "http://user:hunter2@gpu-07:8000/v1"
	cfg.Dataset.Path, cfg.Dataset.Format, cfg.Dataset.Limit = "prompts.jsonl", "messages", 1000
	cfg.Concurrency, cfg.Generation.N, cfg.Generation.MaxTokens = 64, 2, 2048
	cfg.Generation.Stream, cfg.Output.Format = false, "jsonl"
	job := jobOf(cfg, dataset.Shard{Index: 1, Count: 4})
	job.Sampling.Model = "resolved-model"
	got := newReportConfig(cfg, job)
	want := reportConfig{BaseURL: "http://user:xxxxx@gpu-07:8000/v1", Model: "resolved-model", Dataset: "prompts.jsonl",
		Format: "messages", Limit: 1000, Shard: "1/4", Concurrency: 64, Samples: 2, MaxTokens: 2048,
		Stream: false, OutputFormat: "jsonl"}
	if got != want {
		t.Errorf("report config =\n%+v\nwant\n%+v", got, want)
	}
}
