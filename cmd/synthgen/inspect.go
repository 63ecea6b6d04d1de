package main

// synthgen inspect DIR...: an audit of output directories for a person
// (or, with --json, a script). Per directory, in this order:
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
//
// Several directories (one per --shard i/n) are also read as one dataset:
// a "combined" section adds them up, and a key in two of them is a
// duplicate. The exit code is 1 when anything is invalid.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/hub"
	"github.com/synthgen/synthgen/dataset/template"
	"github.com/synthgen/synthgen/generator/job"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

type inspectFlags struct {
	json      bool
	dataset   string
	shard     string
	allShards bool
}

// inspectShardTable is the most shards listed one per line; past it only
// the ones not ok are, after a count.
const inspectShardTable = 12

func newInspectCmd() *cobra.Command {
	var f inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect DIR...",
		Short: "Check output directories: done, failed and pending keys, duplicates, shard validity, tokens",
		Long: `inspect reads an output directory in full and reports what it holds: records and
distinct keys, duplicates (there must be none), every shard and whether it reads,
done / failed / pending keys against the dataset, finish_reason counts and the
truncated (finish_reason "length") share, token totals, and the run history.

It changes nothing and takes no lock, so it is safe while a run is writing the
directory: shards being appended (.open, .journal) are read up to their last
complete line and shown as open.

Pending keys are counted against the dataset named in the manifest (dataset.path,
format, id field, limit, generation.n). When that path does not resolve from
here, give it with --dataset. A directory made with --shard i/n is compared with
its part of the dataset, which its manifest records (a directory written before
synthgen recorded it: from its report.json, or give it with --shard).

Given several directories (the outputs of --shard 0/n ... n-1/n), inspect reports
each and then all of them as one dataset, where a key present in two directories
is a duplicate.

The last line of each directory is its verdict: "ok" only when nothing is
invalid and every selected key is done; "incomplete: 5,053 of 6,000 keys
pending" (or failed for good) when the directories are sound but the job is
not done; "unknown" when the dataset cannot be counted from here.

Exit status: 0 when nothing is invalid and the job is done (or cannot be
counted), 4 when nothing is invalid but keys are pending or failed, 1 when
something is invalid (a duplicate key, a shard that does not read, a shard the
manifest lists that is gone, ...), 2 when a DIR is not an output directory.`,
		Example: `  synthgen inspect out/run
  synthgen inspect --dataset /data/prompts.jsonl /data/synth/perfectblend-25k
  synthgen inspect out/shard-0 out/shard-1 out/shard-2 out/shard-3
  synthgen inspect --json out/run | jq '.dirs[0].dataset.pending'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New("inspect: no DIR given"), "see 'synthgen inspect --help'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, dirs []string) error {
			return runInspect(cmd.OutOrStdout(), dirs, f)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.BoolVar(&f.json, "json", false, "print the report as one JSON object (the same figures) instead of text")
	fs.StringVar(&f.dataset, "dataset", "", "dataset file or glob to count pending keys against, instead of the manifest's dataset.path")
	fs.StringVar(&f.shard, "shard", "", `with one DIR: count pending keys against shard "i/n" of the dataset instead of the one its manifest records`)
	fs.BoolVar(&f.allShards, "all-shards", false, fmt.Sprintf("list every shard, also when there are more than %d", inspectShardTable))
	return cmd
}

// inspectDir is one directory's report as --json prints it: the audit's
// figures plus the join with the dataset.
type inspectDir struct {
	*audit.Audit
	Dataset *job.Plan `json:"dataset,omitempty"`
	// WrittenBy names the run writing the directory as it was read (its
	// lock held): its figures are what it had finalized by then.
	WrittenBy string `json:"written_by,omitempty"`
}

// inspectOutput is the whole --json document. ok is what the exit status
// says: true (exit 0) only when nothing is invalid and the job is done or
// cannot be counted; a pending or failed key is never ok (exit 4), sound
// as the directories may be. verdict is the words of the exit.
type inspectOutput struct {
	OK       bool         `json:"ok"`
	Sound    bool         `json:"sound"` // nothing invalid: no duplicate, every shard reads, ...
	Verdict  string       `json:"verdict"`
	Dirs     []inspectDir `json:"dirs"`
	Combined *inspectDir  `json:"combined,omitempty"`
	Notes    []string     `json:"notes,omitempty"`

	set *audit.Set // the audits Dirs and Combined show
}

func runInspect(w io.Writer, dirs []string, f inspectFlags) error {
	var forced *dataset.Shard
	if f.shard != "" {
		if len(dirs) != 1 {
			return usageError(errors.New("--shard: only with one DIR"), "with several DIRs, each takes its shard from its manifest")
		}
		sh, err := dataset.ParseShard(f.shard)
		if err != nil {
			return usageError(fmt.Errorf("--shard: %w", err), "")
		}
		forced = &sh
	}
	dirs, same := uniqueDirs(dirs)
	out, err := inspectDirs(dirs, forced, f.dataset, "")
	if err != nil {
		return err
	}
	defer out.set.Close()
	out.Notes = append(same, out.Notes...)
	verdict := judgeInspect(&out)
	if err := printInspect(w, out, f, len(dirs)); err != nil {
		return err
	}
	return verdict
}

// judgeInspect sets out's ok and verdict and returns the error inspect
// exits with (nil: exit 0). A directory that is invalid exits 1; a sound
// one whose job has a pending or failed key exits 4, and is not ok.
func judgeInspect(out *inspectOutput) error {
	var err error
	c := completenessOf(*out)
	switch {
	case !out.Sound:
		err = &exitError{code: exitFailure, err: errors.New(inspectVerdict(*out)),
			hint: "each problem above says what to do; run inspect again afterwards"}
	case c.Known && !c.Done():
		err = &exitError{code: exitPending, err: errors.New(c.String()), hint: c.hint()}
	}
	out.OK = err == nil
	switch {
	case err != nil:
		out.Verdict = err.Error()
	case c.Known:
		out.Verdict = "ok: " + c.String()
	default:
		out.Verdict = "sound: " + c.String()
	}
	return err
}

// inspectDirs audits each directory, then all of them as one dataset
// (audit.Dirs), and counts each against its job's selection of the dataset
// (read from datasetPath when it is not empty). The key indexes spill into
// tmp ("": TMPDIR).
func inspectDirs(dirs []string, forced *dataset.Shard, datasetPath, tmp string) (inspectOutput, error) {
	set, err := audit.DirsIn(tmp, dirs...)
	if err != nil {
		return inspectOutput{}, usageError(err, "give the output.dir of a run (the directory holding manifest.json and data/)")
	}
	out := inspectOutput{set: set}
	planner := job.Planner{Remote: hub.Remote{}, TempDir: tmp}
	var jobs []job.Job // of the directories whose manifest names one
	for _, a := range set.Dirs {
		if m := a.Manifest; m != nil {
			if n := job.MixedJobs(a.Dir, m.JobHash, m.Jobs, m.Runs); n != "" {
				a.Notes = append(a.Notes, n)
			}
		}
		d := inspectDir{Audit: a}
		if h, held, err := sink.HeldBy(a.Dir); err == nil && held {
			d.WrittenBy = h.String()
			a.Notes = append(a.Notes, fmt.Sprintf("being written now by %s: these figures are what it had finalized when read (the records in its open part are not in them)", h))
		}
		if j, ok := jobOfAudit(a, forced); ok {
			d.Dataset = planner.Add(j, a, a.Distinct)
			jobs = append(jobs, j)
		}
		out.Dirs = append(out.Dirs, d)
	}
	if set.NotCombined != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("not combined: %v", set.NotCombined))
	}
	if c := set.Combined; c != nil {
		d := &inspectDir{Audit: c}
		if n := missingShards(jobs); n != "" {
			out.Notes = append(out.Notes, n)
		}
		if len(jobs) == len(set.Dirs) {
			d.Dataset = planner.AddUnion(jobs, c, c.Distinct)
		}
		out.Combined = d
	}
	planner.Count(datasetPath)
	for _, d := range out.Dirs {
		if d.Dataset != nil && d.Dataset.Changed != "" {
			d.Problems = append(d.Problems, fmt.Sprintf("the dataset's files are not the ones this directory was made from: %s; "+
				"its ids now name other rows than the records answer: restore the files, or give the original with --dataset", d.Dataset.Changed))
		}
	}
	out.Sound = set.OK()
	return out, nil
}

// printInspect writes the report as text or JSON.
func printInspect(w io.Writer, out inspectOutput, f inspectFlags, ndirs int) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	} else {
		p := &inspectPrinter{w: w, allShards: f.allShards}
		for _, d := range out.Dirs {
			p.dir(d, d.Dir)
		}
		if out.Combined != nil {
			p.dir(*out.Combined, fmt.Sprintf("combined: %d dirs as one dataset", ndirs))
		}
		for _, n := range out.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
		if err := p.err; err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	return nil
}

// inspectVerdict names what is wrong, per directory, in one line.
func inspectVerdict(out inspectOutput) string {
	var parts []string
	add := func(name string, r *audit.Audit) {
		if r.OK() {
			return
		}
		var what []string
		if n := r.DuplicateKeys; n == 1 {
			what = append(what, "1 duplicate key")
		} else if n > 1 {
			what = append(what, fmt.Sprintf("%d duplicate keys", n))
		}
		if bad := r.InvalidParts(); len(bad) > 0 {
			what = append(what, fmt.Sprintf("%s (%s)", plural(len(bad), "invalid shard", "invalid shards"), strings.Join(bad, ", ")))
		}
		if len(what) == 0 {
			what = append(what, r.Problems[0])
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", name, strings.Join(what, ", "),
			plural(len(r.Problems), "problem", "problems")))
	}
	for _, d := range out.Dirs {
		add(d.Dir, d.Audit)
	}
	if out.Combined != nil {
		add("combined", out.Combined.Audit)
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string { return pluralNum(int64(n), one, many) }

func pluralNum(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return inspectNum(n) + " " + many
}

// jobOfAudit is the job a directory's manifest records, with the shard
// forced by --shard when given; false when the directory has no manifest
// or it cannot be read as a job (the audit's Problems say why).
func jobOfAudit(a *audit.Audit, forced *dataset.Shard) (job.Job, bool) {
	m := a.Manifest
	if m == nil {
		return job.Job{}, false
	}
	j, err := job.ManifestJob(a.Dir, m.Job, m.Legacy)
	if err != nil {
		a.Problems = append(a.Problems, err.Error())
		return job.Job{}, false
	}
	j.Selection.Limit = m.Limit
	if forced != nil {
		j.Selection.Shard = *forced
	}
	return j, true
}

// missingShards says which shards of an i/n split are not among the
// directories' jobs, when every job names its shard with the same n.
func missingShards(jobs []job.Job) string {
	n := 0
	have := map[int]bool{}
	for _, job := range jobs {
		sh := job.Selection.Shard
		if sh.Whole() || (n != 0 && sh.Count != n) {
			return ""
		}
		n = sh.Count
		have[sh.Index] = true
	}
	var missing []string
	for i := range n {
		if !have[i] {
			missing = append(missing, fmt.Sprintf("%d/%d", i, n))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the combined figures cover only the shards given: %s not among the DIRs", strings.Join(missing, ", "))
}

// inspectPrinter writes the text report; the first write error sticks.
type inspectPrinter struct {
	w         io.Writer
	allShards bool
	err       error
}

func (p *inspectPrinter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *inspectPrinter) dir(d inspectDir, title string) {
	r := d.Audit
	p.printf("== %s ==\n", title)
	if m := r.Manifest; m != nil && len(r.Dirs) == 0 {
		model := ""
		var template []template.Message
		if job, err := job.ManifestJob(r.Dir, m.Job, m.Legacy); err == nil {
			model, template = job.Sampling.Model, job.Prompt.Template
		}
		p.printf("made by synthgen %s, identity %.12s, model %s\n", m.Version, m.JobHash, orNone(model))
		p.template(template)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	shards := ""
	if len(r.Dirs) == 0 {
		shards = " in " + plural(len(r.Parts), "shard file", "shard files")
	}
	fmt.Fprintf(tw, "records\t%s%s, %s distinct keys, %s\n", inspectNum(r.Records), shards, inspectNum(r.Distinct),
		pluralNum(r.DuplicateKeys, "duplicate", "duplicates"))
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
	p.verdict(r, d.Dataset)
}

// planLines: the directory against its job's selection of the dataset.
func planLines(tw io.Writer, j *job.Plan) {
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
	fmt.Fprintf(tw, "dataset\t%s keys in %s: %s done, %s failed, %s pending\n", inspectNum(j.Selected), what,
		inspectNum(j.Done), inspectNum(j.Failed), inspectNum(j.Pending))
	if j.Outside > 0 {
		fmt.Fprintf(tw, "\t%s keys on disk are outside this selection (a smaller limit, another shard?)\n", inspectNum(j.Outside))
	}
	switch {
	case j.DupIDs > 0:
		fmt.Fprintf(tw, "\t%s skipped, %s an earlier row's id (each id is asked once, by its first row)\n",
			pluralNum(j.BadRows, "bad row", "bad rows"), pluralNum(j.DupIDs, "repeating", "repeating"))
	case j.BadRows > 0:
		fmt.Fprintf(tw, "\t%s skipped\n", pluralNum(j.BadRows, "bad row", "bad rows"))
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
			plural(e.Open, "key", "keys"), formatCounts(causes))
	case e.Keys > 0:
		fmt.Fprintf(tw, "errors\tnone open (%s, each superseded by a record)\n", plural(e.Keys, "key failed once", "keys failed once"))
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
		parts = append(parts, fmt.Sprintf("%s %s (%.1f%%)", name, inspectNum(r.FinishReasons[f]), 100*float64(r.FinishReasons[f])/float64(r.Records)))
	}
	fmt.Fprintf(tw, "finish\t%s; truncated (length) %.1f%%\n", strings.Join(parts, ", "), 100*r.TruncatedShare)
	fmt.Fprintf(tw, "tokens\tprompt %s, completion %s (avg %s per record)\n", inspectNum(r.PromptTokens),
		inspectNum(r.CompletionTokens), inspectNum(r.CompletionTokens/r.Records))
	fmt.Fprintf(tw, "reason\tempty in %s (%.1f%%); <think> tags in content in %s (%.1f%%)\n", inspectNum(r.EmptyReasoning),
		100*r.EmptyReasoningShare, inspectNum(r.ThinkTags), 100*r.ThinkTagsShare)
}

// verdict: the notes, then the problems with what to do, or "ok".
func (p *inspectPrinter) verdict(r *audit.Audit, plan *job.Plan) {
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
		p.printf("%s\n", soundVerdict(plan))
	}
	p.printf("\n")
}

// soundVerdict is the last line of a directory with no problem: "ok" only
// when its job is known to be done.
func soundVerdict(plan *job.Plan) string {
	switch {
	case plan == nil:
		return "sound: no problems; whether its job is complete is unknown (no job to count against)"
	case plan.Unreadable != "":
		return "sound: no problems; whether its job is complete is unknown (the dataset is not readable from here)"
	}
	if c := planCompleteness(plan); !c.Done() {
		return "sound: no problems, but " + c.String()
	}
	return "ok: no problems, every selected key done"
}

func (p *inspectPrinter) shards(r *audit.Audit) {
	if len(r.Parts) == 0 {
		p.printf("shards     none\n")
		return
	}
	list := r.Parts
	if len(r.Parts) > inspectShardTable && !p.allShards {
		counts := map[string]int64{}
		list = nil
		for _, sh := range r.Parts {
			counts[sh.State]++
			if sh.State != audit.PartOK {
				list = append(list, sh)
			}
		}
		p.printf("shards     %d files: %s", len(r.Parts), formatCounts(counts))
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

func (p *inspectPrinter) runs(r *audit.Audit) {
	m := r.Manifest
	if m == nil || len(m.Runs) == 0 {
		return
	}
	p.printf("runs\n")
	for i, run := range m.Runs {
		start := run.StartedAt.UTC().Format("2006-01-02 15:04:05Z")
		line := fmt.Sprintf("  %d  %s  %s, %s, %s", i+1, start, runEnd(run, i == len(m.Runs)-1),
			pluralNum(run.RecordsWritten, "record", "records"), pluralNum(run.ErrorsWritten, "error", "errors"))
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
	took := fmtDuration(run.EndedAt.Sub(run.StartedAt).Round(time.Second))
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

// inspectNum groups digits by thousands: 1234567 -> 1,234,567.
func inspectNum(n int64) string { return message.NewPrinter(language.English).Sprintf("%d", n) }

// template prints the job's prompt.messages, each turn's template as
// written (quoted: newlines as \n).
func (p *inspectPrinter) template(turns []template.Message) {
	if len(turns) == 0 {
		return
	}
	p.printf("prompt.messages (rendered over each row's fields):\n")
	for i, t := range turns {
		p.printf("  [%d] %s: %s\n", i+1, t.Role, strconv.Quote(t.Content))
	}
}
