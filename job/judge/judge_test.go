package judge

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/job/plan"
	"github.com/synthgen/synthgen/sink/audit"
)

// TestJudge: only a sound directory whose job is known done, and has keys,
// is done; one that cannot be counted is ok but not done; a job of no keys
// is never ok; a live run is named in the hint of a job not done.
func TestJudge(t *testing.T) {
	t.Parallel()
	dir := func(p *plan.Plan, writtenBy string, problems ...string) *Report {
		return &Report{Sound: len(problems) == 0, Dirs: []Dir{{Audit: &audit.Audit{Dir: "out", Problems: problems}, Dataset: p, WrittenBy: writtenBy}}}
	}
	for _, c := range []struct {
		name    string
		r       *Report
		want    Outcome
		ok      bool
		verdict string
		hint    string
	}{
		{"done", dir(&plan.Plan{Selected: 10, Done: 10}, ""), Done, true, "ok: complete: all 10 keys done", ""},
		{"pending", dir(&plan.Plan{Selected: 10, Done: 7, Pending: 3}, ""), Incomplete, false, "incomplete: 3 of 10 keys pending", "run the job again"},
		{"pending, a run writing it", dir(&plan.Plan{Selected: 10, Done: 7, Pending: 3}, "synthgen pid 7 on h"), Incomplete, false, "incomplete: 3 of 10 keys pending", "synthgen pid 7 on h is writing out now"},
		{"every row bad", dir(&plan.Plan{BadRows: 2}, ""), Empty, false, "no keys: the job selects none, its rows all skipped (2 bad rows", "check the job against the dataset"},
		{"an empty dataset", dir(&plan.Plan{}, ""), Empty, false, "no keys: the dataset selects no rows", "check the job against the dataset"},
		{"no job", dir(nil, ""), Unknown, true, "sound: whether the job is complete is unknown", ""},
		{"invalid", dir(&plan.Plan{Selected: 10, Done: 10}, "", "a problem"), Invalid, false, "out: a problem (1 problem)", ""},
	} {
		if got := c.r.Judge(); got != c.want || c.r.OK != c.ok || !strings.HasPrefix(c.r.Verdict, c.verdict) || !strings.Contains(c.r.Hint(), c.hint) {
			t.Errorf("%s: %v, ok %v, verdict %q, hint %q; want %v, %v, %q..., hint with %q", c.name, got, c.r.OK, c.r.Verdict, c.r.Hint(), c.want, c.ok, c.verdict, c.hint)
		}
	}
}
