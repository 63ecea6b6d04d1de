// Package plan counts a job's selection of the dataset against what output
// directories hold: done, failed and pending keys, bad rows, a dataset that
// changed. Run works through the same selection; inspect and export show it.
package plan

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/stamp"
	"github.com/synthgen/synthgen/internal/extsort"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// Holdings is what an output directory holds, as far as a plan needs it.
// *audit.Audit (package sink/audit) is one.
type Holdings interface {
	// EachKey calls yield with each distinct key that has a record on
	// disk, in sink.CompareKeys order, until yield returns false.
	EachKey(yield func(k sink.Key) bool) error
	Failed(k sink.Key) bool // k failed for good and no record superseded it
}

// Plan is a job's selection counted against an output directory: the keys
// (id, sample) it selects, and of those the done, the failed and the
// pending ones. Run works through the same selection; inspect shows it.
type Plan struct {
	Path     string `json:"path"`
	Shard    string `json:"shard,omitempty"` // "i/n" when the job is one shard of the dataset
	Limit    int64  `json:"limit,omitempty"`
	Samples  int    `json:"samples"`       // generation.n
	Selected int64  `json:"selected_keys"` // ids x samples
	Done     int64  `json:"done"`
	Failed   int64  `json:"failed"`
	Pending  int64  `json:"pending"`
	Outside  int64  `json:"outside"` // distinct keys on disk that the selection does not hold
	// BadRows are the rows of the selection a run skips as bad: rows that
	// do not make a prompt (for a job of whole conversations, every turn
	// is read), and rows repeating an earlier row's id (DupIDs of them).
	// Their keys are not selected.
	BadRows int64 `json:"bad_rows,omitempty"`
	DupIDs  int64 `json:"duplicate_ids,omitempty"` // rows whose id an earlier row of the selection had
	// Unreadable says why the figures above are unknown (the dataset
	// cannot be read from here); nothing is counted then.
	Unreadable string `json:"unreadable,omitempty"`
	// Changed says how the dataset's files differ from the ones the job
	// was made from (their sizes and hashes): the ids then name other rows
	// than the records answer, and the figures above are about the files
	// as they are now.
	Changed string `json:"changed,omitempty"`
}

// Planner counts plans, reading each distinct dataset once whatever the
// number of directories (one per --shard i/n) compared with it.
type Planner struct {
	// Remote reads hf:// dataset paths (hub.Remote{} of package
	// dataset/hub): set by the caller, so that this package, which export
	// needs, links no HTTP client. Nil: such a dataset is Unreadable.
	Remote dataset.Remote
	// Outputs reads a first pass's output directory named as the dataset
	// (outdir.Reader{} of package dataset/outdir): set by the caller, as
	// Remote is. Nil: such a dataset is Unreadable.
	Outputs dataset.Outputs
	// TempDir is where ids read out of order are sorted ("": TMPDIR).
	TempDir string

	targets []*planTarget
}

type planTarget struct {
	sel      dataset.Selection // the dataset read and, for one job, its rows
	whole    bool              // generation.turns: all: a row's every turn is read
	template []chat.Message    // prompt.messages: a row that does not render is bad
	contains func(index int64) bool
	held     Holdings
	distinct int64 // distinct keys on disk
	plan     *Plan
	// The count is a merge of the selection's ids, in id order, with the
	// keys held (join.go): ids read in order (row indices, file:row) are
	// joined as they come; a target whose ids come out of order (an id
	// column) is counted again from its ids sorted on disk (sorted). A
	// run asks a repeated id once among the rows it reads (a later row
	// with it is a bad row): in id order a repeat is the id just joined,
	// so it is counted once per target, not over the whole dataset, and
	// no set of the ids is held.
	join      *joiner
	unordered bool
	sorted    *extsort.Sorter[string]
}

// Add counts job against held, which holds distinct keys. The returned
// plan is filled by Count.
func (p *Planner) Add(j job.Job, held Holdings, distinct int64) *Plan {
	sel := j.Selection
	t := &planTarget{sel: sel, whole: j.Prompt.Whole(), template: j.Prompt.Template, contains: sel.Contains, held: held, distinct: distinct, plan: &Plan{
		Path: sel.Path, Shard: sel.Shard.String(), Limit: sel.Limit, Samples: j.Samples(),
	}}
	p.targets = append(p.targets, t)
	return t.plan
}

// AddUnion counts the union of jobs' selections (the shards of one
// dataset, run into several directories) against held, their combined
// holdings. The jobs read one dataset with one number of samples.
func (p *Planner) AddUnion(jobs []job.Job, held Holdings, distinct int64) *Plan {
	if len(jobs) == 0 {
		return nil
	}
	first := jobs[0].Selection
	contains := func(index int64) bool {
		for _, j := range jobs {
			if j.Selection.Contains(index) {
				return true
			}
		}
		return false
	}
	sel := first
	sel.ShardContent = nil // each directory's plan compares its own files
	sel.Limit = 0
	for _, j := range jobs {
		if j.Selection.Limit <= 0 {
			sel.Limit = 0
			break
		}
		sel.Limit = max(sel.Limit, j.Selection.Limit)
	}
	t := &planTarget{sel: sel, whole: jobs[0].Prompt.Whole(), template: jobs[0].Prompt.Template, contains: contains, held: held, distinct: distinct, plan: &Plan{
		Path: first.Path, Samples: jobs[0].Samples(),
	}}
	p.targets = append(p.targets, t)
	return t.plan
}

// Count reads the datasets and fills every plan. path, when not empty,
// reads the dataset from there instead of where the jobs say (it moved, or
// the directory was made on another machine). A dataset that cannot be read
// leaves its plans Unreadable.
func (p *Planner) Count(path string) {
	type group struct {
		opts    dataset.Options
		targets []*planTarget
	}
	var groups []*group
	for _, t := range p.targets {
		if path != "" {
			t.sel.Path, t.sel.Revision, t.plan.Path = path, "", path
		} else if p := Resolve(t.sel); p != t.sel.Path {
			t.sel.Path, t.plan.Path = p, p
		}
		var g *group
		for _, h := range groups {
			if sameRows(h.opts.Selection, t.sel) && h.opts.Conversations == t.whole && slices.EqualFunc(h.opts.Template, t.template, sameTurn) {
				g = h
				break
			}
		}
		if g == nil {
			g = &group{opts: dataset.Options{Selection: t.sel, Conversations: t.whole, Template: t.template, OnBadRow: dataset.OnBadRowSkip, Remote: p.Remote, Outputs: p.Outputs}}
			g.opts.Shard = dataset.Shard{}
			groups = append(groups, g)
		}
		// The pass reads up to the largest limit; each target keeps its own.
		if g.opts.Limit > 0 && (t.sel.Limit <= 0 || t.sel.Limit > g.opts.Limit) {
			g.opts.Limit = t.sel.Limit
		}
		g.targets = append(g.targets, t)
	}
	for _, g := range groups {
		compareContent(g.opts, g.targets)
		if err := countPass(g.opts, g.targets, p.TempDir); err != nil {
			for _, t := range g.targets {
				pl := t.plan
				*pl = Plan{Path: pl.Path, Shard: pl.Shard, Limit: pl.Limit, Samples: pl.Samples, Unreadable: err.Error(), Changed: pl.Changed}
			}
		}
	}
}

// compareContent stamps a local dataset, when a target recorded what its
// files held, and says on each target whose record differs what changed.
// The stamps recorded are trusted for files that did not change (path,
// size, modification time, inode), as a resume trusts them. Split by file,
// a target's own files are stamped (the listing of all, a stat each, for
// every target).
func compareContent(opts dataset.Options, targets []*planTarget) {
	var now stamp.Content
	stamped := false
	for _, t := range targets {
		if t.sel.ByFile() {
			compareShardContent(opts, t)
			continue
		}
		if !t.sel.Output.IsZero() {
			compareOutput(opts, t)
			continue
		}
		if len(t.sel.Content) == 0 {
			continue
		}
		if !stamped {
			var err error
			o := opts
			o.Known = t.sel.Content
			if now, err = dataset.Stamp(o); err != nil {
				return // countPass reports the dataset unreadable
			}
			stamped = true
		}
		if now.Identity() != t.sel.Content.Identity() {
			t.plan.Changed = fmt.Sprintf("%s (made from) -> %s (now)", t.sel.Content, now)
		}
	}
}

// compareShardContent is compareContent for a target split by file: the
// listing of every file, and the target's own files' bytes.
func compareShardContent(opts dataset.Options, t *planTarget) {
	if len(t.sel.Files) > 0 {
		files, err := dataset.List(opts)
		if err != nil {
			return
		}
		if files.Identity() != t.sel.Files.Identity() {
			t.plan.Changed = fmt.Sprintf("%s (made from) -> %s (now)", t.sel.Files, files)
			return
		}
	}
	if len(t.sel.ShardContent) == 0 {
		return
	}
	o := opts
	o.Shard, o.Known = t.sel.Shard, t.sel.ShardContent
	now, err := dataset.Stamp(o)
	if err != nil {
		return
	}
	if now.Identity() != t.sel.ShardContent.Identity() {
		t.plan.Changed = fmt.Sprintf("%s (made from) -> %s (now)", t.sel.ShardContent, now)
	}
}

// sameRows reports whether two selections read the same rows as the same
// ids, the same of them bad, whatever their limit and shard.
func sameRows(a, b dataset.Selection) bool {
	return a.Source() == b.Source() && a.Format == b.Format && a.PromptField == b.PromptField && a.IDField == b.IDField &&
		a.ParamsField == b.ParamsField && a.Output.Identity() == b.Output.Identity() && a.ShardBy == b.ShardBy
}

// countPass reads one dataset's ids and counts every target's keys: a
// merge of each target's ids with the keys it holds, in id order. A target
// whose ids do not come in order is counted by a second pass, which sorts
// its ids on disk first.
func countPass(opts dataset.Options, targets []*planTarget, tmp string) error {
	if opts.Path == "" {
		return errors.New("the manifest names no dataset.path")
	}
	if err := readPass(opts, targets, false, tmp); err != nil {
		return err
	}
	var again []*planTarget
	for _, t := range targets {
		if t.unordered {
			pl := t.plan
			*pl = Plan{Path: pl.Path, Shard: pl.Shard, Limit: pl.Limit, Samples: pl.Samples, Changed: pl.Changed}
			again = append(again, t)
		}
	}
	if len(again) > 0 {
		if err := readPass(opts, again, true, tmp); err != nil {
			return err
		}
	}
	for _, t := range targets {
		t.plan.Outside = t.distinct - t.plan.Done
	}
	return nil
}

// sortBudget is the memory the targets of one pass sort their ids in, in
// all.
const sortBudget = 32 << 20

// readPass reads the dataset once for targets: joining each target's ids
// as they come, or with sorted, collecting them to be sorted and joined
// after the pass.
func readPass(opts dataset.Options, targets []*planTarget, sorted bool, tmp string) (err error) {
	// A bad row counts for the targets whose rows hold it (the pass reads
	// every shard's).
	opts.OnSkip = func(e *dataset.RowError) {
		for _, t := range targets {
			if t.contains(e.Row) {
				t.plan.BadRows++
			}
		}
	}
	src, err := dataset.Open(opts)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, t := range targets {
		if sorted {
			t.sorted = extsort.New(idCodec, extsort.Options{Dir: tmp, Pattern: ".synthgen-inspect-*.ids", Budget: sortBudget / len(targets)})
		} else {
			t.join = newJoiner(t.held, t.plan)
		}
	}
	defer func() {
		for _, t := range targets {
			if t.join != nil {
				if jerr := t.join.close(); err == nil {
					err = jerr
				}
				t.join = nil
			}
			if t.sorted != nil {
				_ = t.sorted.Close()
				t.sorted = nil
			}
		}
	}()
	for {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for _, t := range targets {
			if !t.contains(p.Index) {
				continue
			}
			switch {
			case t.sorted != nil:
				if err := t.sorted.Add(p.ID); err != nil {
					return err
				}
			case !t.unordered && !t.join.add(p.ID):
				t.unordered = true
			}
		}
	}
	for _, t := range targets {
		if t.sorted != nil {
			if err := t.joinSorted(); err != nil {
				return err
			}
		}
	}
	return nil
}

// joinSorted joins the ids the pass gathered for t, in order, with what
// its directory holds.
func (t *planTarget) joinSorted() error {
	t.unordered = false
	ids, err := t.sorted.Sorted()
	if err != nil {
		return err
	}
	t.join = newJoiner(t.held, t.plan)
	for {
		id, ok := ids.Next()
		if !ok {
			break
		}
		t.join.add(id)
	}
	return ids.Err()
}

// compareOutput stamps the output directory a target's job read (a first
// pass) and says on it what changed since the job started.
func compareOutput(opts dataset.Options, t *planTarget) {
	opts.Output = stamp.Output{}
	now, ok, err := dataset.StampOutput(opts)
	if err != nil || !ok {
		return // countPass reads the parts the job recorded, or says why not
	}
	if now.Identity() != t.sel.Output.Identity() {
		t.plan.Changed = fmt.Sprintf("%s (made from) -> %s (now): %s", t.sel.Output, now, now.DescribeChange(t.sel.Output))
	}
}

// Resolve is where sel's dataset is from here: its path, or, when that is
// relative to another directory (the run's) and names nothing from here,
// the same path under the directory its stamps' absolute paths show.
func Resolve(sel dataset.Selection) string {
	p := sel.Path
	if filepath.IsAbs(p) || strings.Contains(p, "://") || !sel.Output.IsZero() {
		return p
	}
	if m, _ := filepath.Glob(p); len(m) > 0 {
		return p
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	for _, f := range append(slices.Clone(sel.Content), sel.ShardContent...) {
		if f.Path == "" {
			continue
		}
		for d := filepath.Dir(f.Path); ; d = filepath.Dir(d) {
			if ok, _ := filepath.Match(filepath.Join(d, p), f.Path); ok {
				return filepath.Join(d, p)
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return p
}

// sameTurn says whether two prompt.messages turns are the same: a
// template's turn is a role and a content template, never tool calls.
func sameTurn(a, b chat.Message) bool { return a.Role == b.Role && a.Content == b.Content }
