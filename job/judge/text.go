package judge

// The report as text for a person, per directory in this order:
//
//	header      the directory, who made it (version, identity, model)
//	records     records in readable shards, distinct keys, duplicates
//	dataset     selection keys (ids x generation.n) done / failed / pending
//	errors      keys failed for good, by cause
//	finish      finish_reason counts; "length" is truncated at max_tokens
//	tokens      prompt and completion token totals
//	shards      a table (or, for many shards, a count and the ones not ok)
//	runs        one line per run of the manifest's history
//	notes       worth knowing, nothing to do
//	PROBLEMS    what makes the directory invalid, each with what to do

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/internal/human"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/job/plan"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// ShardTable is the most shards listed one per line; past it only the
// ones not ok are, after a count (unless all are asked for).
const ShardTable = 12

// WriteProblems lists, a line each, what makes each directory (and their
// union) invalid: export's refusal, without the rest of the report.
func (r *Report) WriteProblems(w io.Writer) {
	list := func(name string, a *audit.Audit) {
		for _, p := range a.Problems {
			fmt.Fprintf(w, "%s: %s\n", name, p)
		}
	}
	for _, d := range r.Dirs {
		list(d.Dir, d.Audit)
	}
	if r.Combined != nil {
		list("combined", r.Combined.Audit)
	}
}

// WriteText writes the report as text: each directory, their combination,
// the notes. allShards lists every shard, also past ShardTable.
func (r *Report) WriteText(w io.Writer, allShards bool) error {
	p := &printer{w: w, allShards: allShards}
	for _, d := range r.Dirs {
		p.dir(d, d.Dir)
	}
	if r.Combined != nil {
		p.dir(*r.Combined, fmt.Sprintf("combined: %d dirs as one dataset", len(r.Dirs)))
	}
	for _, n := range r.Notes {
		p.printf("note: %s\n", n)
	}
	return p.err
}

// printer writes the text report; the first write error sticks.
type printer struct {
	w         io.Writer
	allShards bool
	err       error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) dir(d Dir, title string) {
	r := d.Audit
	p.printf("== %s ==\n", title)
	if m := r.Manifest; m != nil && len(r.Dirs) == 0 {
		model := ""
		var turns []chat.Message
		if job, err := job.ManifestJob(r.Dir, m.Job, m.Legacy); err == nil {
			model, turns = job.Sampling.Model, job.Prompt.Template
		}
		p.printf("made by synthgen %s, identity %.12s, model %s\n", m.Version, m.JobHash, orNone(model))
		p.template(turns)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	shards := ""
	if len(r.Dirs) == 0 {
		shards = " in " + human.Count(int64(len(r.Parts)), "shard file", "shard files")
	}
	fmt.Fprintf(tw, "records\t%s%s, %s distinct keys, %s\n", human.Num(r.Records), shards, human.Num(r.Distinct),
		human.Count(r.DuplicateKeys, "duplicate", "duplicates"))
	if d.Dataset != nil {
		planLines(tw, d.Dataset)
	}
	errorLines(tw, r.Errors)
	finishLines(tw, r)
	_ = tw.Flush()
	p.printf("%s", b.String())
	if len(r.Dirs) == 0 {
		p.shards(r)
		p.runs(r)
	}
	p.verdict(d)
}

// planLines: the directory against its job's selection of the dataset.
func planLines(tw io.Writer, j *plan.Plan) {
	what := j.Path
	if j.Shard != "" {
		what += " shard " + j.Shard
	}
	if j.Limit > 0 {
		what += fmt.Sprintf(" (limit %d)", j.Limit)
	}
	if j.Unreadable != "" {
		fmt.Fprintf(tw, "dataset\t%s: not readable from here (%s); pending not counted, give the dataset with --dataset PATH\n", what, j.Unreadable)
		return
	}
	fmt.Fprintf(tw, "dataset\t%s keys in %s: %s done, %s failed, %s pending\n", human.Num(j.Selected), what,
		human.Num(j.Done), human.Num(j.Failed), human.Num(j.Pending))
	if j.Outside > 0 {
		fmt.Fprintf(tw, "\t%s keys on disk are outside this selection (a smaller limit, another shard?)\n", human.Num(j.Outside))
	}
	switch {
	case j.DupIDs > 0:
		fmt.Fprintf(tw, "\t%s skipped, %s an earlier row's id (each id is asked once, by its first row)\n",
			human.Count(j.BadRows, "bad row", "bad rows"), human.Count(j.DupIDs, "repeating", "repeating"))
	case j.BadRows > 0:
		fmt.Fprintf(tw, "\t%s skipped\n", human.Count(j.BadRows, "bad row", "bad rows"))
	}
}

func errorLines(tw io.Writer, e audit.ErrorSummary) {
	switch {
	case e.Open > 0:
		causes := map[string]int64{}
		for c, n := range e.ByCause {
			causes[c] = int64(n)
		}
		fmt.Fprintf(tw, "errors\t%s failed for good: %s (rerun with --retry-errors to request them again)\n",
			human.Count(int64(e.Open), "key", "keys"), human.Counts(causes))
	case e.Keys > 0:
		fmt.Fprintf(tw, "errors\tnone open (%s, each superseded by a record)\n", human.Count(int64(e.Keys), "key failed once", "keys failed once"))
	default:
		fmt.Fprintf(tw, "errors\tnone\n")
	}
}

func finishLines(tw io.Writer, r *audit.Audit) {
	if r.Records == 0 {
		return
	}
	var parts []string
	for _, f := range r.SortedFinishReasons() {
		name := f
		if name == "" {
			name = `""`
		}
		parts = append(parts, fmt.Sprintf("%s %s (%.1f%%)", name, human.Num(r.FinishReasons[f]), 100*float64(r.FinishReasons[f])/float64(r.Records)))
	}
	fmt.Fprintf(tw, "finish\t%s; truncated (length) %.1f%%\n", strings.Join(parts, ", "), 100*r.TruncatedShare)
	cached := ""
	if r.CachedTokens > 0 {
		cached = fmt.Sprintf(" (%s cached)", human.Num(r.CachedTokens))
	}
	fmt.Fprintf(tw, "tokens\tprompt %s%s, completion %s (avg %s per record)\n", human.Num(r.PromptTokens), cached,
		human.Num(r.CompletionTokens), human.Num(r.CompletionTokens/r.Records))
	if r.Cost > 0 {
		// The records' own costs, at the price of the run that wrote each.
		fmt.Fprintf(tw, "cost\t%s (avg %s per record)\n", human.Dollars(r.Cost), human.Dollars(r.Cost/float64(r.Records)))
	}
	fmt.Fprintf(tw, "reason\tempty in %s (%.1f%%); <think> tags in content in %s (%.1f%%)\n", human.Num(r.EmptyReasoning),
		100*r.EmptyReasoningShare, human.Num(r.ThinkTags), 100*r.ThinkTagsShare)
	if r.ToolCallRecords > 0 {
		// Only a job of tool rows has the line: the report of the others is as it was.
		fmt.Fprintf(tw, "tools\tcalls in %s records (%.1f%%), %s calls, arguments not JSON in %s\n", human.Num(r.ToolCallRecords),
			100*float64(r.ToolCallRecords)/float64(r.Records), human.Num(r.ToolCalls), human.Num(r.InvalidToolCalls))
	}
	if kinds := r.DivergenceKinds(); len(kinds) > 0 {
		// Whole conversations with tools that ended where the target left the row.
		parts := make([]string, len(kinds))
		for i, k := range kinds {
			parts[i] = k + " " + human.Num(r.Divergences[k])
		}
		fmt.Fprintf(tw, "diverged	%s\n", strings.Join(parts, ", "))
	}
}

// verdict: the notes, then the problems with what to do, or "ok".
func (p *printer) verdict(d Dir) {
	r := d.Audit
	if len(r.Notes) > 0 {
		p.printf("notes\n")
		for _, n := range r.Notes {
			p.printf("  - %s\n", n)
		}
	}
	if len(r.Problems) > 0 {
		p.printf("PROBLEMS (%d)\n", len(r.Problems))
		for i, pr := range r.Problems {
			p.printf("  %d. %s\n", i+1, pr)
		}
	} else {
		p.printf("%s\n", d.Sound())
	}
	p.printf("\n")
}

func (p *printer) shards(r *audit.Audit) {
	if len(r.Parts) == 0 {
		p.printf("shards     none\n")
		return
	}
	list := r.Parts
	if len(r.Parts) > ShardTable && !p.allShards {
		counts := map[string]int64{}
		list = nil
		for _, sh := range r.Parts {
			counts[sh.State]++
			if sh.State != audit.PartOK {
				list = append(list, sh)
			}
		}
		p.printf("shards     %d files: %s", len(r.Parts), human.Counts(counts))
		if len(list) == 0 {
			p.printf(" (--all-shards lists them)\n")
			return
		}
		p.printf("; not ok:\n")
	} else {
		p.printf("shards\n")
	}
	width := 1
	for _, sh := range list {
		width = max(width, len(fmt.Sprint(sh.Records)))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, sh := range list {
		state := sh.State
		if sh.State == audit.PartOK && !sh.Listed {
			state += ", not in manifest"
		}
		if sh.Problem != "" {
			state += ": " + sh.Problem
		}
		fmt.Fprintf(tw, "  %s\t%s\t%*d\t%s\n", sh.Name, sh.Format, width, sh.Records, state)
	}
	_ = tw.Flush()
	p.printf("%s", b.String())
}

func (p *printer) runs(r *audit.Audit) {
	m := r.Manifest
	if m == nil || len(m.Runs) == 0 {
		return
	}
	p.printf("runs\n")
	for i, run := range m.Runs {
		start := run.StartedAt.UTC().Format("2006-01-02 15:04:05Z")
		line := fmt.Sprintf("  %d  %s  %s, %s, %s", i+1, start, runEnd(run, i == len(m.Runs)-1),
			human.Count(run.RecordsWritten, "record", "records"), human.Count(run.ErrorsWritten, "error", "errors"))
		if recs, errs, ok := r.UnendedRun(); ok && i == len(m.Runs)-1 {
			line = fmt.Sprintf("  %d  %s  %s, %s and %s in its parts", i+1, start, runEnd(run, true),
				human.Count(recs, "record", "records"), human.Count(errs, "error", "errors"))
		}
		if run.Limit > 0 {
			line += fmt.Sprintf(", limit %d", run.Limit)
		}
		if run.Version != "" {
			line += ", synthgen " + run.Version
		}
		if run.Forced {
			line += ", FORCED"
		}
		if len(m.Jobs) > 1 && run.JobHash != "" {
			line += fmt.Sprintf(", job %.12s", run.JobHash)
		}
		p.printf("%s\n", line)
		for _, n := range run.Notes {
			p.printf("       %s\n", n)
		}
	}
}

// runEnd says how a run of the history ended. A run that never closed the
// directory was killed (kill -9, OOM, a reboot) when another run followed
// it; only the last one may still be running.
func runEnd(run sink.Run, last bool) string {
	if run.EndedAt == nil {
		if last {
			return "not ended (running now, or killed)"
		}
		return "killed (never ended: kill -9, OOM or a reboot; the next run recovered it)"
	}
	took := human.Duration(run.EndedAt.Sub(run.StartedAt).Round(time.Second))
	switch run.Outcome {
	case "done":
		return "done in " + took
	case "":
		return "ended after " + took // written before outcomes were recorded
	default:
		return run.Outcome + " after " + took
	}
}

func orNone(s string) string {
	if s == "" {
		return "(not set)"
	}
	return s
}

// template prints the job's prompt.messages, each turn's template as
// written (quoted: newlines as \n).
func (p *printer) template(turns []chat.Message) {
	if len(turns) == 0 {
		return
	}
	p.printf("prompt.messages (rendered over each row's fields):\n")
	for i, t := range turns {
		p.printf("  [%d] %s: %s\n", i+1, t.Role, strconv.Quote(t.Content))
	}
}
