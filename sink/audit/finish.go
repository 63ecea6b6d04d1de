package audit

import (
	"fmt"
	"slices"
	"strings"
)

// This file derives what needs every part read: the totals, and the keys
// held more than once.

// finish derives the totals and the problems that need every key: one
// pass over the sorted key index (scan).
func (a *Audit) finish() error {
	if err := a.scan(); err != nil {
		return err
	}
	a.Errors.Keys = len(a.failed)
	a.Errors.Open = 0
	a.Errors.ByCause = map[string]int{}
	for _, f := range a.failed {
		if !f.held {
			a.Errors.Open++
			cause := f.cause
			if cause == "" {
				cause = "unknown"
			}
			a.Errors.ByCause[cause]++
		}
	}
	if a.Records > 0 {
		a.TruncatedShare = float64(a.FinishReasons["length"]) / float64(a.Records)
		a.EmptyReasoningShare = float64(a.EmptyReasoning) / float64(a.Records)
		a.ThinkTagsShare = float64(a.ThinkTags) / float64(a.Records)
		switch {
		case 2*a.EmptyReasoning > a.Records && 2*a.ThinkTags > a.Records:
			a.note("%.0f%% of the records have no reasoning and %.0f%% carry <think> tags in their content: "+
				"the server ran without a reasoning parser, and the reasoning is inside content "+
				"(start vLLM or SGLang with --reasoning-parser, e.g. deepseek_r1 or qwen3, or llama.cpp with --reasoning-format deepseek, for the next run)",
				100*a.EmptyReasoningShare, 100*a.ThinkTagsShare)
		case a.EmptyReasoning == a.Records:
			a.note("no record has any reasoning (nor <think> tags in its content): the model does not reason, " +
				"or the server sent none; a drafter trained on these rows learns no reasoning")
		}
	}
	a.Problems = append(a.Problems, a.dups.problems()...)
	if n := a.DuplicateKeys - int64(len(a.Duplicates)); n > 0 {
		a.note("%d more duplicate keys are not listed one by one (the first %d are)", n, len(a.Duplicates))
	}
	return nil
}

// dupGroups gathers the keys held more than once by the set of files
// holding them, in the order the sets first appear (key order): one
// problem per set, so that a part copied whole is one line, not a thousand.
// With across, only keys held in more than one directory count (the
// combination of several, whose directories report their own).
type dupGroups struct {
	across bool
	groups map[string]*dupGroup
	order  []string
}

type dupGroup struct {
	files []string
	first Duplicate
	n     int
}

func newDupGroups(across bool) *dupGroups {
	return &dupGroups{across: across, groups: map[string]*dupGroup{}}
}

func (g *dupGroups) add(d Duplicate) {
	if g.across {
		dirs := map[string]bool{}
		for _, f := range d.Files {
			dirs[dirOfData(f)] = true
		}
		if len(dirs) < 2 {
			return
		}
	}
	files := slices.Clone(d.Files)
	slices.Sort(files)
	id := strings.Join(files, "\x00")
	gr := g.groups[id]
	if gr == nil {
		gr = &dupGroup{files: files, first: d}
		g.groups[id] = gr
		g.order = append(g.order, id)
	}
	gr.n++
}

func (g *dupGroups) problems() []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, id := range g.order {
		gr := g.groups[id]
		where := "in " + strings.Join(gr.files, " and ")
		if len(gr.files) == 2 && gr.files[0] == gr.files[1] {
			where = "twice in " + gr.files[0]
		}
		if gr.n == 1 {
			out = append(out, fmt.Sprintf("duplicate key id=%q sample=%d %s: keep one copy, delete the other (a JSONL line, or the row from a Parquet shard)",
				gr.first.ID, gr.first.Sample, where))
			continue
		}
		out = append(out, fmt.Sprintf("%d duplicate keys %s (first id=%q sample=%d): keep one copy of each; when a whole shard was copied, move the copy away",
			gr.n, where, gr.first.ID, gr.first.Sample))
	}
	return out
}

// UnendedRun is what the last run of the manifest's history holds on disk
// when it never ended (killed, or running now), and ok: a run counts its
// records and errors in the manifest only when it ends, so a killed one
// says 0 of each there while its parts hold them. They are what the
// directory holds beyond what the runs before it counted; a run that
// adopted parts with --force may make that more than it wrote.
func (a *Audit) UnendedRun() (records, errs int64, ok bool) {
	m := a.Manifest
	if m == nil || len(m.Runs) == 0 || m.Runs[len(m.Runs)-1].EndedAt != nil {
		return 0, 0, false
	}
	records, errs = a.Records, a.Errors.Records
	for _, r := range m.Runs[:len(m.Runs)-1] {
		records -= r.RecordsWritten
		errs -= r.ErrorsWritten
	}
	return max(records, 0), max(errs, 0), true
}
