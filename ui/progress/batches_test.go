package progress

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats"
)

// The batch mode's batches on the progress line: by state, the server's
// status while it holds a batch, answered/requests where part is answered.
func TestLineShowsBatchStates(t *testing.T) {
	s := runstats.Snapshot{Batches: []runstats.BatchRecord{
		{Number: 1, State: "collected", Status: "completed", Requests: 3000, Completed: 3000},
		{Number: 2, State: "submitted", Status: "in_progress", Requests: 3000, Completed: 1200, Failed: 34},
		{Number: 3, State: "submitted", Status: "in_progress", Requests: 500},
		{Number: 4, State: "intended", Requests: 20},
	}}
	want := "batches 1 collected, 2 in_progress (1,234/3,500), 1 intended"
	if got := Line(s, nil, nil); !strings.Contains(got, " | "+want) {
		t.Errorf("line %q does not say %q", got, want)
	}
	if got := Line(runstats.Snapshot{}, nil, nil); strings.Contains(got, "batches") {
		t.Errorf("line without batches says them: %q", got)
	}
}

// The bar says them too, when they fit.
func TestBarShowsBatchStates(t *testing.T) {
	s := runstats.Snapshot{Batches: []runstats.BatchRecord{{Number: 1, State: "submitted", Status: "validating", Requests: 10}}}
	if got := barLine(s, nil, nil, 200); !strings.Contains(got, "batches 1 validating") {
		t.Errorf("bar %q does not say the batch", got)
	}
}
