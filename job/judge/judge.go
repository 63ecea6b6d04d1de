package judge

import (
	"fmt"
	"os"
	"strings"

	"github.com/synthgen/synthgen/internal/human"
	"github.com/synthgen/synthgen/job/plan"
	"github.com/synthgen/synthgen/sink/audit"
)

// Outcome is the verdict's kind, in the order of their exit codes' weight.
type Outcome int

const (
	// Done: nothing is invalid and every selected key is done.
	Done Outcome = iota
	// Unknown: nothing is invalid, but the job cannot be counted from here.
	Unknown
	// Incomplete: nothing is invalid, but keys are pending or failed.
	Incomplete
	// Empty: nothing is invalid, but the job selects no keys (every row
	// bad, an empty dataset): a run of zero answers is nothing to train on,
	// and no rerun answers it.
	Empty
	// Invalid: a duplicate key, a part that does not read, ...
	Invalid
)

// Judge sets r's OK and Verdict and returns the outcome. Only Done is ok;
// Unknown is "sound" but not ok either of a job it cannot count.
func (r *Report) Judge() Outcome {
	c := r.Completeness()
	var o Outcome
	switch {
	case !r.Sound:
		o, r.Verdict = Invalid, r.Invalid()
	case !c.Known:
		o, r.Verdict = Unknown, "sound: "+c.String()
	case c.Selected == 0:
		o, r.Verdict = Empty, c.String()
	case !c.Done():
		o, r.Verdict = Incomplete, c.String()
	default:
		o, r.Verdict = Done, "ok: "+c.String()
	}
	r.OK = o == Done || o == Unknown
	return o
}

// Invalid names what is wrong, per directory, in one line ("" when all
// are sound).
func (r *Report) Invalid() string {
	var parts []string
	add := func(name string, a *audit.Audit) {
		if a.OK() {
			return
		}
		var what []string
		if n := a.DuplicateKeys; n == 1 {
			what = append(what, "1 duplicate key")
		} else if n > 1 {
			what = append(what, fmt.Sprintf("%d duplicate keys", n))
		}
		if bad := a.InvalidParts(); len(bad) > 0 {
			what = append(what, fmt.Sprintf("%s (%s)", human.Count(int64(len(bad)), "invalid shard", "invalid shards"), strings.Join(bad, ", ")))
		}
		if len(what) == 0 {
			what = append(what, a.Problems[0])
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", name, strings.Join(what, ", "),
			human.Count(int64(len(a.Problems)), "problem", "problems")))
	}
	for _, d := range r.Dirs {
		add(d.Dir, d.Audit)
	}
	if r.Combined != nil {
		add("combined", r.Combined.Audit)
	}
	return strings.Join(parts, "; ")
}

// Completeness is what a set of directories holds of its job.
type Completeness struct {
	Known                     bool   // the dataset was counted
	Why                       string // not known: why
	Selected, Pending, Failed int64
	BadRows                   int64 // rows of the selection a run skips
}

// Done says the job is known to be answered in full: every one of its
// keys, and it has some.
func (c Completeness) Done() bool {
	return c.Known && c.Selected > 0 && c.Pending == 0 && c.Failed == 0
}

// String is the verdict's words: "incomplete: 5,053 of 6,000 keys pending".
func (c Completeness) String() string {
	switch {
	case !c.Known:
		return "whether the job is complete is unknown: " + c.Why
	case c.Selected == 0 && c.BadRows > 0:
		return fmt.Sprintf("no keys: the job selects none, its rows all skipped (%s: none makes a prompt)", human.Count(c.BadRows, "bad row", "bad rows"))
	case c.Selected == 0:
		return "no keys: the dataset selects no rows (an empty file, or a limit or shard past its end)"
	case c.Done():
		return fmt.Sprintf("complete: all %s keys done", human.Num(c.Selected))
	}
	var what []string
	if c.Pending > 0 {
		what = append(what, fmt.Sprintf("%s of %s keys pending", human.Num(c.Pending), human.Num(c.Selected)))
	}
	if c.Failed > 0 {
		what = append(what, fmt.Sprintf("%s failed for good", human.Num(c.Failed)))
	}
	return "incomplete: " + strings.Join(what, ", ")
}

// Hint says what finishes the job.
func (c Completeness) Hint() string {
	if c.Known && c.Selected == 0 {
		return "check the job against the dataset: dataset.path, dataset.limit and --shard, and the fields its rows need (dataset.prompt_field, prompt.messages)"
	}
	var do []string
	if c.Pending > 0 {
		do = append(do, "run the job again (the same command) to answer the pending keys")
	}
	if c.Failed > 0 {
		do = append(do, "rerun with --retry-errors to ask the failed ones again")
	}
	return strings.Join(do, "; ")
}

// Live names the runs writing the directories now, each as "synthgen pid
// 4242 on gpu-01 is writing DIR now"; none when no run holds one.
func (r *Report) Live() []string {
	var live []string
	for _, d := range r.Dirs {
		if d.WrittenBy != "" {
			live = append(live, d.WrittenBy+" is writing "+d.Dir+" now")
		}
	}
	return live
}

// Hint says what finishes the job: while a run is doing it, to wait for
// that run, not to start another.
func (r *Report) Hint() string {
	c := r.Completeness()
	if live := r.Live(); len(live) > 0 && c.Known && c.Selected > 0 && !c.Done() {
		return strings.Join(live, "; ") + ": inspect again when it has ended (should it stop before its end, the same command resumes it)"
	}
	return c.Hint()
}

// Completeness is the job's completeness as the directories hold it: the
// combined plan of several directories, else the one directory's.
func (r *Report) Completeness() Completeness {
	if len(r.Dirs) == 1 {
		return dirCompleteness(&r.Dirs[0])
	}
	if r.Combined == nil {
		return Completeness{Why: "the directories are not read as one job's (see the notes)"}
	}
	return dirCompleteness(r.Combined)
}

func dirCompleteness(d *Dir) Completeness {
	switch {
	case d == nil || d.Dataset == nil:
		return Completeness{Why: "no job to count against (no manifest, or one that does not read as a job)"}
	case d.Dataset.Unreadable != "":
		return Completeness{Why: "the dataset is not readable from here (" + d.Dataset.Unreadable + "); give it with --dataset PATH"}
	}
	return planCompleteness(d.Dataset)
}

func planCompleteness(p *plan.Plan) Completeness {
	return Completeness{Known: true, Selected: p.Selected, Pending: p.Pending, Failed: p.Failed, BadRows: p.BadRows}
}

// Sound is the last line of a directory with no problem: "ok" only when
// its job is known to be done.
func (d Dir) Sound() string {
	p := d.Dataset
	switch {
	case p == nil:
		return "sound: no problems; whether its job is complete is unknown (no job to count against)"
	case p.Unreadable != "":
		return "sound: no problems; whether its job is complete is unknown (the dataset is not readable from here)"
	}
	if c := planCompleteness(p); !c.Done() {
		if d.WrittenBy != "" {
			return "sound: no problems, but " + c.String() + " (being written now by " + d.WrittenBy + ")"
		}
		return "sound: no problems, but " + c.String()
	}
	return "ok: no problems, every selected key done"
}

// Unique drops a directory named again (another spelling of it, a link,
// an overlapping glob): one directory read twice would be every key
// twice. It returns the directories in their first order and a note for
// each one dropped.
func Unique(dirs []string) ([]string, []string) {
	var out, notes []string
	var seen []os.FileInfo
	var names []string
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			out = append(out, d) // the audit says what is wrong with it
			continue
		}
		dup := -1
		for i, s := range seen {
			if os.SameFile(st, s) {
				dup = i
				break
			}
		}
		if dup >= 0 {
			notes = append(notes, fmt.Sprintf("%s is %s, given before: read once", d, names[dup]))
			continue
		}
		seen, names = append(seen, st), append(names, d)
		out = append(out, d)
	}
	return out, notes
}
