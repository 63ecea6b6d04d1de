package runfiles

import (
	"errors"
	"time"

	"github.com/synthgen/synthgen/sink/layout"
)

// HiddenStatesRecord is the hidden_states block of status.json while the
// hidden-state pass (hidden_states.enabled) runs after the run, and of
// status.json and report.json once it has ended.
type HiddenStatesRecord struct {
	// State is the pass's: running, draining (after the first signal),
	// then done, interrupted (a signal: run again to go on) or failed.
	State          State `json:"state"`
	Units          int   `json:"units"`           // records' turns with token ids
	Kept           int   `json:"kept"`            // files extracted and kept by this pass
	KeptBefore     int   `json:"kept_before"`     // files kept by earlier passes
	ToExtract      int   `json:"to_extract"`      // units neither kept nor given up on yet
	Failed         int   `json:"failed"`          // units that failed every attempt (DIR/hidden/failed.jsonl)
	Errors         int   `json:"errors"`          // attempts that failed (a bad file, an HTTP error), retried or not
	ProjectedBytes int64 `json:"projected_bytes"` // what the units not kept at the start were to take
	BytesKept      int64 `json:"bytes_kept"`      // the kept files' sizes, all passes
}

// Hidden rewrites status.json while the hidden-state pass runs: the
// run's final status (what Finish wrote) at the time now, in the pass's
// state (running or draining: the process is still at work), with h.
// history.jsonl is not appended to: its points are the run's.
func (s *StatusWriter) Hidden(h HiddenStatesRecord) error {
	s.mu.Lock()
	final := s.final
	s.mu.Unlock()
	if final == nil {
		return errors.New("status: the hidden-state pass before the run's end")
	}
	st := *final
	st.Time = time.Now()
	st.State = h.State
	st.HiddenStates = &h
	return writeJSON(layout.Dir(s.dir).Status(), st)
}

// FinishHidden writes the final status.json and report.json once the
// pass has ended: the run's own, with h, and in state (the run's, or the
// pass's when it was interrupted or failed; empty: the run's) with
// exitCode and err, the whole command's outcome.
func (s *StatusWriter) FinishHidden(h HiddenStatesRecord, state State, exitCode int, err error) error {
	s.mu.Lock()
	final, report := s.final, s.report
	s.mu.Unlock()
	if final == nil || report == nil {
		return errors.New("status: the hidden-state pass before the run's end")
	}
	st := *final
	st.Time = time.Now()
	if state != "" {
		st.State = state
	}
	st.HiddenStates = &h
	if err := writeJSON(layout.Dir(s.dir).Status(), st); err != nil {
		return err
	}
	rep := *report
	rep.StatusRecord = st
	rep.Event = "report"
	rep.EndedAt = st.Time
	rep.DurationS = rep.EndedAt.Sub(s.info.StartedAt).Seconds()
	rep.ExitCode, rep.Error = exitCode, ""
	if err != nil {
		rep.Error = err.Error()
	}
	return writeJSON(layout.Dir(s.dir).Report(), rep)
}
