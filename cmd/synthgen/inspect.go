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
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/sink"
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
its part of the dataset: the shard is taken from --shard, else from the
directory's report.json, else the whole dataset is assumed.

Given several directories (the outputs of --shard 0/n ... n-1/n), inspect reports
each and then all of them as one dataset, where a key present in two directories
is a duplicate.

Exit status: 0 when nothing is invalid, 1 when something is (a duplicate key, a
shard that does not read, a shard the manifest lists that is gone, ...), 2 when
a DIR is not an output directory.`,
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
	fs.StringVar(&f.shard, "shard", "", `with one DIR: the "i/n" it was run with, to count pending keys against that part of the dataset`)
	fs.BoolVar(&f.allShards, "all-shards", false, fmt.Sprintf("list every shard, also when there are more than %d", inspectShardTable))
	return cmd
}

// inspectDir is one directory's report as --json prints it: the sink's
// figures plus the join with the dataset.
type inspectDir struct {
	*sink.Report
	Dataset *datasetJoin `json:"dataset,omitempty"`
}

// inspectOutput is the whole --json document.
type inspectOutput struct {
	OK       bool         `json:"ok"`
	Dirs     []inspectDir `json:"dirs"`
	Combined *inspectDir  `json:"combined,omitempty"`
	Notes    []string     `json:"notes,omitempty"`
}

func runInspect(w io.Writer, dirs []string, f inspectFlags) error {
	var forced *shardSel
	if f.shard != "" {
		if len(dirs) != 1 {
			return usageError(errors.New("--shard: only with one DIR"), "with several DIRs, each takes its shard from its report.json")
		}
		i, n, err := parseShard(f.shard)
		if err != nil {
			return usageError(err, "")
		}
		forced = &shardSel{i: i, n: n}
	}
	out := inspectOutput{OK: true}
	var targets []*joinTarget
	for _, dir := range dirs {
		rep, err := sink.Inspect(dir)
		if err != nil {
			return usageError(err, "give the output.dir of a run (the directory holding manifest.json and data/)")
		}
		d := inspectDir{Report: rep}
		if t := newJoinTarget(rep, forced); t != nil {
			d.Dataset = t.join
			targets = append(targets, t)
		}
		out.Dirs = append(out.Dirs, d)
		out.OK = out.OK && rep.OK()
	}
	if len(dirs) > 1 {
		reps := make([]*sink.Report, len(out.Dirs))
		for i, d := range out.Dirs {
			reps[i] = d.Report
		}
		c, err := sink.Combine(reps...)
		if err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("not combined: %v", err))
		} else {
			d := &inspectDir{Report: c}
			if n := missingShards(targets); n != "" {
				out.Notes = append(out.Notes, n)
			}
			if t := combinedTarget(c, targets); t != nil {
				d.Dataset = t.join
				targets = append(targets, t)
			}
			out.Combined = d
			out.OK = out.OK && c.OK()
		}
	}
	joinDataset(targets, f.dataset)

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
			p.dir(*out.Combined, fmt.Sprintf("combined: %d dirs as one dataset", len(dirs)))
		}
		for _, n := range out.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
		if err := p.err; err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if !out.OK {
		return &exitError{code: exitFailure, err: errors.New(inspectVerdict(out)),
			hint: "each problem above says what to do; run inspect again afterwards"}
	}
	return nil
}

// inspectVerdict names what is wrong, per directory, in one line.
func inspectVerdict(out inspectOutput) string {
	var parts []string
	add := func(name string, r *sink.Report) {
		if r.OK() {
			return
		}
		var what []string
		if n := len(r.Duplicates); n == 1 {
			what = append(what, "1 duplicate key")
		} else if n > 1 {
			what = append(what, fmt.Sprintf("%d duplicate keys", n))
		}
		if bad := r.InvalidShards(); len(bad) > 0 {
			what = append(what, fmt.Sprintf("%s (%s)", plural(len(bad), "invalid shard", "invalid shards"), strings.Join(bad, ", ")))
		}
		if len(what) == 0 {
			what = append(what, r.Problems[0])
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", name, strings.Join(what, ", "),
			plural(len(r.Problems), "problem", "problems")))
	}
	for _, d := range out.Dirs {
		add(d.Dir, d.Report)
	}
	if out.Combined != nil {
		add("combined", out.Combined.Report)
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

// datasetJoin is a directory compared with its part of the dataset.
type datasetJoin struct {
	Path     string `json:"path"`
	Shard    string `json:"shard,omitempty"` // "i/n" when the directory holds one shard
	Limit    int64  `json:"limit,omitempty"`
	Samples  int    `json:"samples"`       // generation.n
	Selected int64  `json:"selected_keys"` // ids x samples
	Done     int64  `json:"done"`
	Failed   int64  `json:"failed"`
	Pending  int64  `json:"pending"`
	Outside  int64  `json:"outside"` // distinct keys on disk that the selection does not hold
	BadRows  int64  `json:"bad_rows,omitempty"`
	DupIDs   int64  `json:"duplicate_ids,omitempty"` // rows whose id an earlier row had (dataset.id_field)
	// Unreadable says why the figures above are unknown; pending is then
	// not counted, which is not an error of the directory.
	Unreadable string `json:"unreadable,omitempty"`
}

type shardSel struct{ i, n int }

// joinTarget is one report to join with a dataset pass.
type joinTarget struct {
	rep  *sink.Report
	opts dataset.Options // the dataset's identity; Limit is the target's
	in   func(index int64) bool
	join *datasetJoin
}

// newJoinTarget reads the dataset settings from the manifest's config; nil
// when the directory has no manifest.
func newJoinTarget(rep *sink.Report, forced *shardSel) *joinTarget {
	m := rep.Manifest
	if m == nil {
		return nil
	}
	opts := dataset.Options{
		Path:        cfgString(m.Config, "dataset", "path"),
		Format:      cfgString(m.Config, "dataset", "format"),
		PromptField: cfgString(m.Config, "dataset", "prompt_field"),
		IDField:     cfgString(m.Config, "dataset", "id_field"),
		Limit:       m.Limit,
		OnBadRow:    dataset.OnBadRowSkip,
	}
	if opts.Path == "" {
		opts.Path = m.Answer["dataset.path"]
	}
	if id := m.Answer["dataset.identity"]; id != "" {
		// A Hub dataset: the commit the run read, not where the branch
		// points today.
		opts.Path = id
	}
	n := max(int(cfgNumber(m.Config, "generation", "n")), 1)
	sel := forced
	if sel == nil {
		sel = shardFromReport(rep.Dir)
	}
	j := &datasetJoin{Path: opts.Path, Limit: opts.Limit, Samples: n}
	limit := opts.Limit
	in := func(index int64) bool { return limit <= 0 || index < limit }
	if sel != nil && sel.n > 1 {
		j.Shard = fmt.Sprintf("%d/%d", sel.i, sel.n)
		s := *sel
		in = func(index int64) bool {
			return (limit <= 0 || index < limit) && index%int64(s.n) == int64(s.i)
		}
	}
	return &joinTarget{rep: rep, opts: opts, in: in, join: j}
}

// combinedTarget selects the union of the directories' selections; nil
// when a directory cannot be joined (no manifest).
func combinedTarget(c *sink.Report, targets []*joinTarget) *joinTarget {
	if len(targets) == 0 || len(targets) != len(c.Dirs) {
		return nil
	}
	parts := append([]*joinTarget(nil), targets...)
	first := parts[0]
	j := &datasetJoin{Path: first.join.Path, Samples: first.join.Samples}
	return &joinTarget{rep: c, opts: first.opts, join: j, in: func(index int64) bool {
		for _, t := range parts {
			if t.in(index) {
				return true
			}
		}
		return false
	}}
}

// missingShards says which shards of an i/n split are not among the
// directories, when every directory names its shard with the same n.
func missingShards(targets []*joinTarget) string {
	n := 0
	have := map[int]bool{}
	for _, t := range targets {
		i, m, err := parseShard(t.join.Shard)
		if t.join.Shard == "" || err != nil || (n != 0 && m != n) {
			return ""
		}
		n = m
		have[i] = true
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

// shardFromReport reads the --shard a run was given from DIR/report.json,
// which a run writes when it ends.
func shardFromReport(dir string) *shardSel {
	data, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		return nil
	}
	var rep struct {
		Config struct {
			Shard string `json:"shard"`
		} `json:"config"`
	}
	if json.Unmarshal(data, &rep) != nil || rep.Config.Shard == "" {
		return nil
	}
	i, n, err := parseShard(rep.Config.Shard)
	if err != nil {
		return nil
	}
	return &shardSel{i: i, n: n}
}

// joinDataset reads each distinct dataset once and counts, for every
// target, its selection's keys as done, failed or pending. Only ids matter:
// a row's key is (id, sample) for sample in 0..n-1.
func joinDataset(targets []*joinTarget, pathOverride string) {
	type group struct {
		opts    dataset.Options
		targets []*joinTarget
	}
	var groups []*group
	for _, t := range targets {
		if pathOverride != "" {
			t.opts.Path = pathOverride
			t.join.Path = pathOverride
		}
		var g *group
		for _, h := range groups {
			if sameDataset(h.opts, t.opts) {
				g = h
				break
			}
		}
		if g == nil {
			g = &group{opts: t.opts}
			groups = append(groups, g)
		}
		// The pass reads up to the largest limit; each target filters its own.
		if g.opts.Limit > 0 && (t.opts.Limit <= 0 || t.opts.Limit > g.opts.Limit) {
			g.opts.Limit = t.opts.Limit
		}
		g.targets = append(g.targets, t)
	}
	for _, g := range groups {
		if err := joinPass(g.opts, g.targets); err != nil {
			for _, t := range g.targets {
				*t.join = datasetJoin{Path: t.join.Path, Shard: t.join.Shard, Limit: t.join.Limit, Samples: t.join.Samples,
					Unreadable: err.Error()}
			}
		}
	}
}

func sameDataset(a, b dataset.Options) bool {
	return a.Path == b.Path && a.Format == b.Format && a.PromptField == b.PromptField && a.IDField == b.IDField
}

func joinPass(opts dataset.Options, targets []*joinTarget) error {
	if opts.Path == "" {
		return errors.New("the manifest names no dataset.path")
	}
	src, err := dataset.Open(opts)
	if err != nil {
		return err
	}
	defer src.Close()
	var seen map[string]struct{}
	if opts.IDField != "" {
		// Row-index ids are unique by construction; an id column may not be.
		seen = map[string]struct{}{}
	}
	var dupIDs int64
	for {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if seen != nil {
			if _, dup := seen[p.ID]; dup {
				dupIDs++
				continue
			}
			seen[p.ID] = struct{}{}
		}
		for _, t := range targets {
			if !t.in(p.Index) {
				continue
			}
			j := t.join
			for s := range j.Samples {
				k := sink.Key{ID: p.ID, Sample: s}
				j.Selected++
				switch {
				case t.rep.Has(k):
					j.Done++
				case t.rep.Failed(k):
					j.Failed++
				default:
					j.Pending++
				}
			}
		}
	}
	for _, t := range targets {
		t.join.BadRows = src.Skipped()
		t.join.DupIDs = dupIDs
		t.join.Outside = t.rep.Distinct - t.join.Done
	}
	return nil
}

func cfgString(m map[string]any, path ...string) string {
	s, _ := cfgLookup(m, path...).(string)
	return s
}

func cfgNumber(m map[string]any, path ...string) float64 {
	switch v := cfgLookup(m, path...).(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	}
	return 0
}

func cfgLookup(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
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
	r := d.Report
	p.printf("== %s ==\n", title)
	if m := r.Manifest; m != nil && len(r.Dirs) == 0 {
		p.printf("made by synthgen %s, identity %.12s, model %s\n", m.Version, m.IdentityHash, orNone(m.Answer["endpoint.model"]))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	shards := ""
	if len(r.Dirs) == 0 {
		shards = " in " + plural(len(r.Shards), "shard file", "shard files")
	}
	fmt.Fprintf(tw, "records\t%s%s, %s distinct keys, %s\n", inspectNum(r.Records), shards, inspectNum(r.Distinct),
		plural(len(r.Duplicates), "duplicate", "duplicates"))
	if j := d.Dataset; j != nil {
		what := j.Path
		if j.Shard != "" {
			what += " shard " + j.Shard
		}
		if j.Limit > 0 {
			what += fmt.Sprintf(" (limit %d)", j.Limit)
		}
		if j.Unreadable != "" {
			fmt.Fprintf(tw, "dataset\t%s: not readable from here (%s); pending not counted, give the dataset with --dataset PATH\n", what, j.Unreadable)
		} else {
			fmt.Fprintf(tw, "dataset\t%s keys in %s: %s done, %s failed, %s pending\n", inspectNum(j.Selected), what,
				inspectNum(j.Done), inspectNum(j.Failed), inspectNum(j.Pending))
			var extra []string
			if j.Outside > 0 {
				extra = append(extra, fmt.Sprintf("%s keys on disk are outside this selection (a smaller limit, another shard?)", inspectNum(j.Outside)))
			}
			if j.BadRows > 0 {
				extra = append(extra, fmt.Sprintf("%s bad rows skipped", inspectNum(j.BadRows)))
			}
			if j.DupIDs > 0 {
				extra = append(extra, fmt.Sprintf("%s rows repeat an earlier id (counted once)", inspectNum(j.DupIDs)))
			}
			for _, e := range extra {
				fmt.Fprintf(tw, "\t%s\n", e)
			}
		}
	}
	if e := r.Errors; e.Open > 0 {
		causes := map[string]int64{}
		for c, n := range e.ByCause {
			causes[c] = int64(n)
		}
		fmt.Fprintf(tw, "errors\t%s failed for good: %s (rerun with --retry-errors to request them again)\n",
			plural(e.Open, "key", "keys"), formatCounts(causes))
	} else if e.Keys > 0 {
		fmt.Fprintf(tw, "errors\tnone open (%s, each superseded by a record)\n", plural(e.Keys, "key failed once", "keys failed once"))
	} else {
		fmt.Fprintf(tw, "errors\tnone\n")
	}
	if r.Records > 0 {
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
	}
	_ = tw.Flush()
	p.printf("%s", b.String())
	if len(r.Dirs) == 0 {
		p.shards(r)
		p.runs(r)
	}
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
		p.printf("ok: no problems\n")
	}
	p.printf("\n")
}

func (p *inspectPrinter) shards(r *sink.Report) {
	if len(r.Shards) == 0 {
		p.printf("shards     none\n")
		return
	}
	list := r.Shards
	if len(r.Shards) > inspectShardTable && !p.allShards {
		counts := map[string]int64{}
		list = nil
		for _, sh := range r.Shards {
			counts[sh.State]++
			if sh.State != sink.ShardOK {
				list = append(list, sh)
			}
		}
		p.printf("shards     %d files: %s", len(r.Shards), formatCounts(counts))
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
		if sh.State == sink.ShardOK && !sh.Listed {
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

func (p *inspectPrinter) runs(r *sink.Report) {
	m := r.Manifest
	if m == nil || len(m.Runs) == 0 {
		return
	}
	p.printf("runs\n")
	for i, run := range m.Runs {
		start := run.StartedAt.UTC().Format("2006-01-02 15:04:05Z")
		end := "not ended (running now, or stopped without closing)"
		if run.EndedAt != nil {
			end = fmt.Sprintf("ended after %s", fmtDuration(run.EndedAt.Sub(run.StartedAt).Round(time.Second)))
		}
		line := fmt.Sprintf("  %d  %s  %s, %s, %s", i+1, start, end,
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
		p.printf("%s\n", line)
		for _, n := range run.Notes {
			p.printf("       %s\n", n)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(not set)"
	}
	return s
}

// inspectNum groups digits by thousands: 1234567 -> 1,234,567.
func inspectNum(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
