package runfiles

// The run's machine-readable files in the output directory, for a second
// shell, a script or a dashboard:
//
//	DIR/status.json   rewritten atomically when the run starts its first
//	                  request (the keys of earlier runs counted), every time
//	                  the caller has a new progress record (Runner.Heartbeat),
//	                  and once more at the end with the final state
//	DIR/report.json   written once at the end (Runner.Finish): the final
//	                  figures, the outcome and exit code, start and end, a
//	                  summary of the config
//	DIR/history.jsonl every status.json above appended as a line, bounded
//	                  (history.go): the plots of `synthgen view`
//
// Both carry every field of the progress record (the figures are named the
// same everywhere), plus who is running and where. Users' scripts read
// them: field names, order and values change only on purpose
// (testdata/*.golden.json pin them).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink/layout"
)

// State is a run's state, as status.json and report.json spell it.
type State string

// Run states. The caller decides which final state an outcome is (see
// RunOutcome); the runner sets running and draining itself.
const (
	StateRunning     State = "running"     // requests are being sent
	StateDraining    State = "draining"    // Drain was called: no new requests, the ones in flight finish
	StateDone        State = "done"        // the selection was worked through (failed requests included)
	StateInterrupted State = "interrupted" // stopped by a signal before the end: rerun to resume
	StateFailed      State = "failed"      // the run could not go on
)

// Names of the files in the output directory (layout's).
const (
	StatusFile = layout.StatusName
	ReportFile = layout.ReportName
)

// RunInfo says which process runs the job, and where.
type RunInfo struct {
	PID       int       `json:"pid"`
	Hostname  string    `json:"hostname"`
	StartedAt time.Time `json:"started_at"`
	OutputDir string    `json:"output_dir"`
}

// StatusRecord is the content of status.json: the progress record (its
// fields at the top level, so `jq .tok_per_s` works on all three) plus
// the state and RunInfo.
type StatusRecord struct {
	Event string `json:"event"` // "status"; shadows the progress record's "progress"
	State State  `json:"state"`
	RunInfo
	runstats.ProgressRecord
	// Warnings are what the run found wrong without stopping (a server
	// that sends no reasoning), each said once and kept from then on.
	Warnings []string `json:"warnings,omitempty"`
	// ConcurrencyAuto is concurrency: auto's limit and why it last moved;
	// absent under a fixed concurrency.
	ConcurrencyAuto *autoconc.Record `json:"concurrency_auto,omitempty"`
	// HiddenStates is the hidden-state pass (hidden_states.enabled) that
	// follows the run: present from its start, absent without it.
	HiddenStates *HiddenStatesRecord `json:"hidden_states,omitempty"`
}

// ReportConfig is the part of the job and its setup a reader of
// report.json needs to tell runs apart; the whole config (without secrets)
// is in manifest.json.
type ReportConfig struct {
	BaseURL      string `json:"base_url"` // passwords masked; several endpoints comma-separated
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

// ReportRecord is the content of report.json.
type ReportRecord struct {
	Event     string       `json:"event"` // "report"
	ExitCode  int          `json:"exit_code"`
	Error     string       `json:"error,omitempty"`
	EndedAt   time.Time    `json:"ended_at"`
	DurationS float64      `json:"duration_s"`    // started_at to ended_at, opening the dataset and the output included
	Written   int          `json:"written"`       // records written by this run
	Failed    int          `json:"error_records"` // error records written by this run
	Skipped   int64        `json:"skipped"`       // keys of the selection done before this run
	BadRows   int64        `json:"bad_rows"`      // dataset rows skipped as bad (a repeated id among them)
	Canceled  int          `json:"canceled"`      // keys whose requests were abandoned because the run stopped
	Lost      int          `json:"lost"`          // records and error records written, not made durable before the disk failed
	Config    ReportConfig `json:"config"`
	StatusRecord
}

// RunOutcome is how a run ended, as report.json says it. What an error
// means (its exit code, its final state) is the caller's policy.
type RunOutcome struct {
	ExitCode int
	State    State // StateDone, StateInterrupted or StateFailed
	Err      error // nil: no error field
	Summary  runstats.Summary
	EndedAt  time.Time // zero: now
}

// StatusWriter writes status.json and report.json for one run. Heartbeat
// is called by the caller's reporter, SetState by Drain (from a signal
// handler), and Finish once after both have stopped; the state is atomic
// so the three may overlap.
type StatusWriter struct {
	dir   string
	info  RunInfo
	cfg   ReportConfig
	state atomic.Value // State

	mu       sync.Mutex
	warnings []string

	auto AutoRecorder // concurrency: auto; nil when fixed
	hist *History     // history.jsonl; nil: none (tests)

	// final and report are what Finish wrote, which the hidden-state
	// pass's files start from (hidden.go); guarded by mu.
	final  *StatusRecord
	report *ReportRecord
}

// AutoRecorder is concurrency: auto's state as status.json shows it
// (autoconc.State): its limit and why it last moved, nil when there is
// none.
type AutoRecorder interface {
	Record() *autoconc.Record
}

// NewStatusWriter writes dir's status.json and report.json for a run that
// began at started; auto is concurrency: auto's state (nil: a fixed
// concurrency).
func NewStatusWriter(dir string, started time.Time, cfg ReportConfig, auto AutoRecorder) *StatusWriter {
	host, _ := os.Hostname() // an unknown host name leaves the field empty
	s := &StatusWriter{
		dir:  dir,
		info: RunInfo{PID: os.Getpid(), Hostname: host, StartedAt: started, OutputDir: absPath(dir)},
		cfg:  cfg,
		auto: auto,
		hist: NewHistory(dir),
	}
	s.state.Store(StateRunning)
	return s
}

// RemoveLeftovers removes the temporary files of status.json, report.json
// and history.jsonl that a kill during a rewrite left behind
// (durable.WriteFile names them .NAME.*.tmp). Call it once the sink holds
// the directory's lock, so no other run is writing them.
func (s *StatusWriter) RemoveLeftovers() error {
	var errs []error
	for _, name := range []string{StatusFile, ReportFile, HistoryFile} {
		leftovers, err := filepath.Glob(layout.Dir(s.dir).Leftovers(name))
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
func (s *StatusWriter) SetState(state State) { s.state.Store(state) }

// AddWarning adds w to the warnings of every status.json and report.json
// written from now on. Safe from any goroutine.
func (s *StatusWriter) AddWarning(w string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warnings = append(s.warnings, w)
}

func (s *StatusWriter) status(rec runstats.ProgressRecord) StatusRecord {
	s.mu.Lock()
	warnings := slices.Clone(s.warnings)
	s.mu.Unlock()
	st := StatusRecord{ProgressRecord: rec, Event: "status", State: s.state.Load().(State), RunInfo: s.info, Warnings: warnings}
	if s.auto != nil {
		st.ConcurrencyAuto = s.auto.Record()
	}
	return st
}

// Heartbeat rewrites status.json with rec and the current state, and
// appends it to history.jsonl.
func (s *StatusWriter) Heartbeat(rec runstats.ProgressRecord) error {
	st := s.status(rec)
	err := writeJSON(layout.Dir(s.dir).Status(), st)
	return errors.Join(err, s.hist.Append(HistoryRecord{StatusRecord: st, Concurrency: s.cfg.Concurrency}))
}

// Finish writes the final status.json and report.json from the last
// progress record and the outcome.
func (s *StatusWriter) Finish(rec runstats.ProgressRecord, o RunOutcome) error {
	if o.EndedAt.IsZero() {
		o.EndedAt = time.Now()
	}
	s.SetState(o.State)
	st := s.status(rec)
	if err := writeJSON(layout.Dir(s.dir).Status(), st); err != nil {
		return err
	}
	herr := s.hist.Append(HistoryRecord{StatusRecord: st, Concurrency: s.cfg.Concurrency})
	rep := ReportRecord{
		StatusRecord: st,
		Event:        "report",
		EndedAt:      o.EndedAt,
		DurationS:    o.EndedAt.Sub(s.info.StartedAt).Seconds(),
		ExitCode:     o.ExitCode,
		Written:      o.Summary.Written,
		Failed:       o.Summary.Failed,
		Skipped:      o.Summary.Skipped,
		BadRows:      o.Summary.BadRows,
		Canceled:     o.Summary.Canceled,
		Lost:         o.Summary.Lost,
		Config:       s.cfg,
	}
	if o.Err != nil {
		rep.Error = o.Err.Error()
	}
	s.mu.Lock()
	s.final, s.report = &st, &rep
	s.mu.Unlock()
	return errors.Join(writeJSON(layout.Dir(s.dir).Report(), rep), herr)
}

// writeJSON replaces path with v, indented for a person's `cat`.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return durable.WriteFile(path, append(b, '\n'), 0o644)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
