// Package judge is what inspect and export judge of output directories:
// each one's audit (package sink/audit), all of them as one dataset, each
// counted against its job's selection of the dataset (package
// job/plan), and the verdict: invalid, incomplete, done, or unknown.
// A directory can be sound (no duplicate, every part reads) and still hold
// part of its job: a script doing `inspect && export` after a crash must
// not ship a partial training file, so both judge the job, not only the
// files. The report is rendered by the caller.
package judge

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/job/plan"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// Options says how to read the directories and their dataset.
type Options struct {
	// Shard, when not nil, is the shard the one directory is counted as,
	// instead of the one its manifest records (inspect's --shard).
	Shard *dataset.Shard
	// DatasetPath, when not empty, reads the dataset from there instead of
	// where the jobs say (inspect's --dataset).
	DatasetPath string
	// TempDir is where the key indexes spill ("": TMPDIR).
	TempDir string
	// Remote and Outputs read hf:// datasets and output directories read
	// as a dataset (a first pass): set by the caller (see plan.Planner).
	Remote  dataset.Remote
	Outputs dataset.Outputs
}

// Dir is one directory's report as inspect --json prints it: the audit's
// figures plus the join with the dataset.
type Dir struct {
	*audit.Audit
	Dataset *plan.Plan `json:"dataset,omitempty"`
	// WrittenBy names the run writing the directory as it was read (its
	// lock held): its figures are what it had finalized by then.
	WrittenBy string `json:"written_by,omitempty"`
}

// Report is the whole --json document. OK is what inspect's exit status
// says: true only when nothing is invalid and the job is done or cannot be
// counted; a pending or failed key is never ok, sound as the directories
// may be. Verdict is the words of the exit. Both are set by Judge.
type Report struct {
	OK       bool     `json:"ok"`
	Sound    bool     `json:"sound"` // nothing invalid: no duplicate, every shard reads, ...
	Verdict  string   `json:"verdict"`
	Dirs     []Dir    `json:"dirs"`
	Combined *Dir     `json:"combined,omitempty"`
	Notes    []string `json:"notes,omitempty"`

	set *audit.Set // the audits Dirs and Combined show
}

// Close removes the audits' key indexes.
func (r *Report) Close() error { return r.set.Close() }

// Dataset is the audit of the directories as one dataset (the combined one
// of several), or nil when they are not read as one (NotCombined says why).
func (r *Report) Dataset() *audit.Audit { return r.set.Dataset() }

// NotCombined says why several directories are not read as one dataset.
func (r *Report) NotCombined() error { return r.set.NotCombined }

// Inspect audits each directory, then all of them as one dataset
// (audit.Dirs), and counts each against its job's selection of the
// dataset. Its error is a directory that is not an output directory.
func Inspect(dirs []string, o Options) (*Report, error) {
	set, err := audit.DirsIn(o.TempDir, dirs...)
	if err != nil {
		return nil, err
	}
	out := &Report{set: set}
	planner := plan.Planner{Remote: o.Remote, Outputs: o.Outputs, TempDir: o.TempDir}
	var jobs []job.Job // of the directories whose manifest names one
	for _, a := range set.Dirs {
		if m := a.Manifest; m != nil {
			if n := job.MixedJobs(a.Dir, m.JobHash, m.Jobs, m.Runs); n != "" {
				a.Notes = append(a.Notes, n)
			}
		}
		d := Dir{Audit: a}
		if h, held, err := sink.HeldBy(a.Dir); err == nil && held {
			d.WrittenBy = h.String()
			a.Notes = append(a.Notes, fmt.Sprintf("being written now by %s: these figures are what it had finalized when read (the records in its open part are not in them)", h))
		}
		if j, ok := jobOfAudit(a, o.Shard); ok {
			if !j.Selection.Output.IsZero() && o.DatasetPath == "" {
				if n := audit.FirstPassNote(plan.Resolve(j.Selection)); n != "" {
					a.Notes = append(a.Notes, n)
				}
			}
			d.Dataset = planner.Add(j, a, a.Distinct)
			jobs = append(jobs, j)
		}
		out.Dirs = append(out.Dirs, d)
	}
	if set.NotCombined != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("not combined: %v", set.NotCombined))
	}
	if c := set.Combined; c != nil {
		d := &Dir{Audit: c}
		if n := missingShards(jobs); n != "" {
			out.Notes = append(out.Notes, n)
		}
		if len(jobs) == len(set.Dirs) {
			d.Dataset = planner.AddUnion(jobs, c, c.Distinct)
		}
		out.Combined = d
	}
	planner.Count(o.DatasetPath)
	for _, d := range out.Dirs {
		if d.Dataset != nil && d.Dataset.Changed != "" {
			d.Problems = append(d.Problems, fmt.Sprintf("the dataset's files are not the ones this directory was made from: %s; "+
				"its ids now name other rows than the records answer: restore the files, or give the original with --dataset", d.Dataset.Changed))
		}
	}
	out.Sound = set.OK()
	return out, nil
}

// jobOfAudit is the job a directory's manifest records, with the shard
// forced when given; false when the directory has no manifest or it cannot
// be read as a job (the audit's Problems say why). A job that does not
// hash to the manifest's job_hash is a problem.
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
	if h := j.Hash(); len(m.Job) > 0 && h != m.JobHash {
		// run refuses the directory by what differs from its config;
		// inspect has no config, but a job that no longer hashes to its
		// hash was edited: the records answer another job than it says.
		a.Problems = append(a.Problems, fmt.Sprintf("%s: its job does not hash to its job_hash (%.12s recorded, %.12s of the job as it reads now): "+
			"it was edited by hand, so the records may answer another job than it names; restore the manifest as the run wrote it",
			filepath.Join(a.Dir, sink.ManifestName), m.JobHash, h))
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
	for _, j := range jobs {
		sh := j.Selection.Shard
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
