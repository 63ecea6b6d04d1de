package generator

import (
	"errors"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
)

// TestOutcome: a run is done only when it answered every key; a failure
// for good makes it incomplete (and still done as a process), a signal
// interrupted, an error failed, and status.json's final state follows.
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		res   Result
		want  Outcome
		state runfiles.State
	}{
		{Result{}, OutcomeDone, runfiles.StateDone},
		{Result{Failed: 2}, OutcomeIncomplete, runfiles.StateDone},
		{Result{Interrupted: true, Failed: 2}, OutcomeInterrupted, runfiles.StateInterrupted},
		{Result{Err: errors.New("disk full"), Interrupted: true}, OutcomeFailed, runfiles.StateFailed},
	} {
		got := tc.res.outcome()
		if got != tc.want || got.state() != tc.state {
			t.Errorf("%+v: outcome %s (state %s), want %s (%s)", tc.res, got, got.state(), tc.want, tc.state)
		}
	}
}
