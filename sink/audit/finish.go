package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink"
)

// This file derives what needs every part read: the totals, and the keys
// held more than once.

// finish derives the totals and the problems that need every part read.
func (a *Audit) finish() {
	a.Distinct = int64(len(a.keys))
	a.Errors.Keys = len(a.failed)
	a.Errors.Open = 0
	a.Errors.ByCause = map[string]int{}
	for k, cause := range a.failed {
		if !a.Has(k) {
			a.Errors.Open++
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
	a.Duplicates = a.duplicates()
	a.Problems = append(a.Problems, groupDuplicates(a.Duplicates)...)
}

// duplicates lists every key held by more than one file, in key order.
func (a *Audit) duplicates() []Duplicate {
	out := []Duplicate{}
	for fp, dk := range a.extra {
		d := Duplicate{ID: dk.key.ID, Sample: dk.key.Sample, Files: []string{a.files[a.keys[fp]]}}
		for _, fi := range dk.more {
			d.Files = append(d.Files, a.files[fi])
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y Duplicate) int {
		return sink.CompareKeys(sink.Key{ID: x.ID, Sample: x.Sample}, sink.Key{ID: y.ID, Sample: y.Sample})
	})
	return out
}

// groupDuplicates makes one problem per set of files sharing keys: a part
// copied whole is one line, not a thousand.
func groupDuplicates(dups []Duplicate) []string {
	type group struct {
		files []string
		first Duplicate
		n     int
	}
	groups := map[string]*group{}
	var order []string
	for _, d := range dups {
		files := slices.Clone(d.Files)
		slices.Sort(files)
		id := strings.Join(files, "\x00")
		g := groups[id]
		if g == nil {
			g = &group{files: files, first: d}
			groups[id] = g
			order = append(order, id)
		}
		g.n++
	}
	var out []string
	for _, id := range order {
		g := groups[id]
		where := "in " + strings.Join(g.files, " and ")
		if len(g.files) == 2 && g.files[0] == g.files[1] {
			where = "twice in " + g.files[0]
		}
		if g.n == 1 {
			out = append(out, fmt.Sprintf("duplicate key id=%q sample=%d %s: keep one copy, delete the other (a JSONL line, or the row from a Parquet shard)",
				g.first.ID, g.first.Sample, where))
			continue
		}
		out = append(out, fmt.Sprintf("%d duplicate keys %s (first id=%q sample=%d): keep one copy of each; when a whole shard was copied, move the copy away",
			g.n, where, g.first.ID, g.first.Sample))
	}
	return out
}
