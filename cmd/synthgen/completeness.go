package main

// Whether a job is done, as inspect and export judge it: a directory can be
// sound (no duplicate, every part reads) and still hold part of its job. A
// script doing `inspect && export` after a crash must not ship a partial
// training file, so both say what is pending and failed, and exit with
// their own code.

import (
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/generator/plan"
)

// completeness is what a set of directories holds of its job.
type completeness struct {
	Known                     bool   // the dataset was counted
	Why                       string // not known: why
	Selected, Pending, Failed int64
}

// Done says the job is known to be answered in full.
func (c completeness) Done() bool { return c.Known && c.Pending == 0 && c.Failed == 0 }

// String is the verdict's words: "incomplete: 5,053 of 6,000 keys pending".
func (c completeness) String() string {
	switch {
	case !c.Known:
		return "whether the job is complete is unknown: " + c.Why
	case c.Done():
		return fmt.Sprintf("complete: all %s keys done", inspectNum(c.Selected))
	}
	var what []string
	if c.Pending > 0 {
		what = append(what, fmt.Sprintf("%s of %s keys pending", inspectNum(c.Pending), inspectNum(c.Selected)))
	}
	if c.Failed > 0 {
		what = append(what, fmt.Sprintf("%s failed for good", inspectNum(c.Failed)))
	}
	return "incomplete: " + strings.Join(what, ", ")
}

// hint says what finishes the job.
func (c completeness) hint() string {
	var do []string
	if c.Pending > 0 {
		do = append(do, "run the job again (the same command) to answer the pending keys")
	}
	if c.Failed > 0 {
		do = append(do, "rerun with --retry-errors to ask the failed ones again")
	}
	return strings.Join(do, "; ")
}

// completenessOf is the job's completeness as the directories hold it:
// the combined plan of several directories, else the one directory's.
func completenessOf(out inspectOutput) completeness {
	plan := func(d *inspectDir) completeness {
		switch {
		case d == nil || d.Dataset == nil:
			return completeness{Why: "no job to count against (no manifest, or one that does not read as a job)"}
		case d.Dataset.Unreadable != "":
			return completeness{Why: "the dataset is not readable from here (" + d.Dataset.Unreadable + "); give it with --dataset PATH"}
		}
		return planCompleteness(d.Dataset)
	}
	if len(out.Dirs) == 1 {
		return plan(&out.Dirs[0])
	}
	if out.Combined == nil {
		return completeness{Why: "the directories are not read as one job's (see the notes)"}
	}
	return plan(out.Combined)
}

func planCompleteness(p *plan.Plan) completeness {
	return completeness{Known: true, Selected: p.Selected, Pending: p.Pending, Failed: p.Failed}
}
