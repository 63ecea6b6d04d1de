package main

// The run's machine-readable files in the output directory, for a second
// shell, a script or a dashboard:
//
//	DIR/status.json   rewritten atomically every progress.interval while the
//	                  run goes on, and once more at the end with the final state
//	DIR/report.json   written once at the end: the final figures, the outcome
//	                  and exit code, start and end, a summary of the config
//
// Both carry every field of the --log-format json progress record (the
// figures are named the same everywhere), plus who is running and where.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/sink"
)

// Run states, as status.json and report.json spell them.
const (
	stateRunning     = "running"     // requests are being sent
	stateDraining    = "draining"    // a signal came: no new requests, the ones in flight finish
	stateDone        = "done"        // the selection was worked through (exit 0, or 3 with failed requests)
	stateInterrupted = "interrupted" // stopped by a signal before the end (exit 130): rerun to resume
	stateFailed      = "failed"      // the run could not go on (exit 1 or 2)
)

// Names of the files in the output directory.
const (
	statusFile = "status.json"
	reportFile = "report.json"
)

// runInfo says which process runs the job, and where.
type runInfo struct {
	PID       int       `json:"pid"`
	Hostname  string    `json:"hostname"`
	StartedAt time.Time `json:"started_at"`
	OutputDir string    `json:"output_dir"`
}

// statusRecord is the content of status.json: the progress record (its
// fields at the top level, so `jq .tok_per_s` works on all three) plus
// the state and runInfo.
type statusRecord struct {
	Event string `json:"event"` // "status"; shadows the progress record's "progress"
	State string `json:"state"`
	runInfo
	generator.ProgressRecord
}

// reportConfig is the part of the config a reader of report.json needs to
// tell runs apart; the whole config (without secrets) is in manifest.json.
type reportConfig struct {
	BaseURL      string `json:"base_url"` // passwords masked
	Model        string `json:"model"`
	Dataset      string `json:"dataset"`
	Format       string `json:"dataset_format"`
	Limit        int64  `json:"limit"`
	Shard        string `json:"shard,omitempty"`
	Concurrency  int    `json:"concurrency"`
	Samples      int    `json:"n"`
	MaxTokens    int    `json:"max_tokens"`
	Stream       bool   `json:"stream"`
	OutputFormat string `json:"output_format"`
}

func newReportConfig(cfg config.Config, job generator.Job) reportConfig {
	return reportConfig{
		BaseURL:      generator.RedactURL(cfg.Endpoint.BaseURL),
		Model:        job.Sampling.Model,
		Dataset:      cfg.Dataset.Path,
		Format:       cfg.Dataset.Format,
		Limit:        cfg.Dataset.Limit,
		Shard:        job.Selection.Shard.String(),
		Concurrency:  cfg.Concurrency,
		Samples:      cfg.Generation.N,
		MaxTokens:    cfg.Generation.MaxTokens,
		Stream:       cfg.Generation.Stream,
		OutputFormat: cfg.Output.Format,
	}
}

// reportRecord is the content of report.json.
type reportRecord struct {
	Event     string       `json:"event"` // "report"
	ExitCode  int          `json:"exit_code"`
	Error     string       `json:"error,omitempty"`
	EndedAt   time.Time    `json:"ended_at"`
	DurationS float64      `json:"duration_s"`    // started_at to ended_at, opening the dataset and the output included
	Written   int          `json:"written"`       // records written by this run
	Failed    int          `json:"error_records"` // error records written by this run
	Skipped   int64        `json:"skipped"`       // keys of the selection already done
	Canceled  int          `json:"canceled"`      // requests cut or never sent because the run stopped
	Config    reportConfig `json:"config"`
	statusRecord
}

// runOutcome is how a run ended.
type runOutcome struct {
	Err     error // nil: exit 0
	Summary generator.Summary
	EndedAt time.Time
}

// runExitCode is the exit code main gives err; nil is success.
func runExitCode(err error) int {
	if err == nil {
		return exitOK
	}
	return exitCode(err)
}

// stateOf maps the error a run returns to its final state.
func stateOf(err error) string {
	switch runExitCode(err) {
	case exitOK, exitIncomplete:
		return stateDone
	case exitInterrupted:
		return stateInterrupted
	default:
		return stateFailed
	}
}

// runStatus writes status.json and report.json for one run. Heartbeat is
// called by the reporter's goroutine, SetState by the signal handler, and
// Finish once by the run after both have stopped; the state is atomic so
// the three may overlap.
type runStatus struct {
	dir   string
	info  runInfo
	cfg   reportConfig
	state atomic.Value // string
}

func newRunStatus(dir string, started time.Time, cfg reportConfig) *runStatus {
	host, _ := os.Hostname() // an unknown host name leaves the field empty
	s := &runStatus{
		dir:  dir,
		info: runInfo{PID: os.Getpid(), Hostname: host, StartedAt: started, OutputDir: absPath(dir)},
		cfg:  cfg,
	}
	s.state.Store(stateRunning)
	return s
}

// RemoveLeftovers removes the temporary files of status.json and
// report.json that a kill during a rewrite left behind (sink.WriteFileAtomic
// names them .NAME.*.tmp). Call it once the sink holds the directory's lock,
// so no other run is writing them.
func (s *runStatus) RemoveLeftovers() error {
	var errs []error
	for _, name := range []string{statusFile, reportFile} {
		leftovers, err := filepath.Glob(filepath.Join(s.dir, "."+name+".*.tmp"))
		if err != nil {
			return fmt.Errorf("remove leftovers of %s: %w", name, err) // only a malformed pattern: a bug
		}
		for _, p := range leftovers {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// SetState changes the state the next heartbeat shows.
func (s *runStatus) SetState(state string) { s.state.Store(state) }

func (s *runStatus) status(rec generator.ProgressRecord) statusRecord {
	return statusRecord{ProgressRecord: rec, Event: "status", State: s.state.Load().(string), runInfo: s.info}
}

// Heartbeat rewrites status.json with rec and the current state.
func (s *runStatus) Heartbeat(rec generator.ProgressRecord) error {
	return writeJSON(filepath.Join(s.dir, statusFile), s.status(rec))
}

// Finish writes the final status.json and report.json from the last
// progress record and the outcome.
func (s *runStatus) Finish(rec generator.ProgressRecord, o runOutcome) error {
	s.SetState(stateOf(o.Err))
	st := s.status(rec)
	if err := writeJSON(filepath.Join(s.dir, statusFile), st); err != nil {
		return err
	}
	rep := reportRecord{
		statusRecord: st,
		Event:        "report",
		EndedAt:      o.EndedAt,
		DurationS:    o.EndedAt.Sub(s.info.StartedAt).Seconds(),
		ExitCode:     runExitCode(o.Err),
		Written:      o.Summary.Written,
		Failed:       o.Summary.Failed,
		Skipped:      o.Summary.Skipped,
		Canceled:     o.Summary.Canceled,
		Config:       s.cfg,
	}
	if o.Err != nil {
		rep.Error = o.Err.Error()
	}
	return writeJSON(filepath.Join(s.dir, reportFile), rep)
}

// writeJSON replaces path with v, indented for a person's `cat`.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return sink.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
