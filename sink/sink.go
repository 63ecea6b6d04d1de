package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/synthgen/synthgen/sink/keyset"
	"github.com/synthgen/synthgen/sink/layout"
)

// JobRecord is the job a run writes for, as its owner encodes it. The sink
// stores it in the manifest and leaves its meaning, and the decision whether
// a directory may be resumed by it, to that owner (Options.Check).
type JobRecord struct {
	Spec    json.RawMessage // the job spec, stored as "job"
	Hash    string          // its identity, stored as "job_hash"
	Version string          // synthgen version
	Config  map[string]any  // effective config without secrets, stored for humans
	Limit   int64           // dataset.limit of this run (0 = all)
}

// Options configures Open.
type Options struct {
	Dir          string
	Format       string        // "jsonl" | "parquet": the format of new parts
	PartSize     int           // records per part (output.shard_size)
	SyncInterval time.Duration // fsync bound; 0 = fsync after every record
	Force        bool          // adopt parts without a manifest, or accept parts lost from disk
	Job          JobRecord
	// Check decides whether this run may write into a directory made
	// before: it is called under the directory's lock with the manifest on
	// disk (nil for a new directory), before anything is changed. An error
	// refuses the directory; accepted lists what it let through only
	// because of a force, recorded in the run, which is marked forced.
	Check func(old *Manifest) (accepted []string, err error)
	Now   func() time.Time // nil = time.Now
}

// forcedNote starts the run notes of what Options.Force accepted; a run
// with any is marked Forced in the manifest.
const forcedNote = "forced: "

// Sink owns an output directory for one run: Open recovers it, Write and
// WriteError append, Flush and Close make it durable.
//
// A Sink is not safe for concurrent use: exactly one goroutine (the engine's
// writer) calls Write, WriteError, Flush and Close, and the query methods
// (Done, Failed, Skip, counts) from that goroutine or before it starts. That
// single owner is what lets the done set be a plain map.
type Sink struct {
	opts    Options
	now     func() time.Time
	dir     string
	dataDir string
	errDir  string
	lock    *os.File
	man     *Manifest
	run     int // index of this run in man.Runs
	// adopted: this run's job is in man.Jobs (it wrote); deferred: a run
	// --force let in, whose job becomes man's job with its first write.
	adopted, deferred bool

	// done holds every key recovered at Open, and failed the keys with a
	// recovered error record (package sink/keyset: a bit a row-index key,
	// 12 bytes another, outside the heap). Neither changes after Open:
	// Recovered hands them to the goroutine that decides what to ask.
	done   *keyset.Set
	failed *keyset.Set
	// What this run wrote, owned by the writer like the files.
	// keysMu orders the owner's additions to written and failedNow with
	// Seen and DoneCount from other goroutines (the producer's).
	keysMu     sync.RWMutex
	written    *keyset.Set
	failedNow  *keyset.Set // keys with an error record written by this run
	failedOpen int         // failed keys (recovered or not) that are not done

	nextData int
	cur      *appendFile // data part being filled; nil until the next Write
	curFinal string      // its final name
	curFmt   string
	curMin   Key
	curMax   Key
	curKeys  keyset.Summary // the part's keys, for its ShardInfo.Keys

	nextErr  int
	errFile  *appendFile
	errFinal string

	log *partLog // where finalizePart lists a part until Close compacts

	// durableRecs and durableErrs count the records and error records this
	// run wrote that a successful fsync made durable: after a failed write
	// or fsync they are what this run has for sure (see Durable).
	durableRecs, durableErrs int

	lastSync time.Time
	err      error // sticky: after a failed write a file may end mid-line
	closed   bool
}

// Open creates or recovers opts.Dir (see recover.go) and returns a Sink that
// knows every key already on disk. It returns Options.Check's error when
// that refuses the directory.
func Open(opts Options) (_ *Sink, err error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	if err := layout.CheckOwn(opts.Dir); err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Sink{
		opts:      opts,
		now:       now,
		dir:       opts.Dir,
		dataDir:   layout.Dir(opts.Dir).Data(),
		errDir:    layout.Dir(opts.Dir).Errors(),
		done:      &keyset.Set{},
		failed:    &keyset.Set{},
		written:   &keyset.Set{},
		failedNow: &keyset.Set{},
	}
	if err := disk.MkdirAll(s.dir); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	if s.lock, err = lockDir(s.dir); err != nil {
		return nil, err
	}
	opened := false
	defer func() {
		// On any way out but success, a panic included: a lock that
		// outlives a failed Open would refuse the next one.
		if !opened {
			_ = s.lock.Close()
		}
	}()

	old, err := ReadManifest(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		old = nil
	} else if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	notes, forcedJob, err := s.admit(old)
	if err != nil {
		return nil, err
	}
	if err := s.makeDirs(); err != nil {
		return nil, err
	}
	rec, err := s.recover(old)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	notes = append(notes, rec.notes...)
	m := s.newManifest(old, rec, notes, forcedJob)
	s.man = m
	s.run = len(m.Runs) - 1
	s.nextData = rec.nextData
	s.nextErr = rec.nextErr
	s.lastSync = now()
	// The compaction: the manifest lists every part recovery found (the
	// old log's included) and names this run's log; only once that rename
	// is durable do the old logs go.
	m.PartLog = partLogName(s.run)
	s.log = &partLog{path: filepath.Join(s.dir, m.PartLog)}
	if err := writeManifest(s.dir, m); err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	if err := removeStalePartLogs(s.dir, m.PartLog); err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	opened = true
	return s, nil
}

// admit decides whether the directory's records may be resumed by this
// job, before recovery touches anything: a mismatch is usually the wrong
// output.dir, and that directory is not ours to change. It returns the
// notes a forced run leaves, and whether Check accepted another job's
// directory.
func (s *Sink) admit(old *Manifest) (notes []string, forcedJob bool, err error) {
	if old != nil {
		if s.opts.Check == nil {
			return nil, false, nil
		}
		accepted, err := s.opts.Check(old)
		if err != nil {
			return nil, false, err
		}
		for _, a := range accepted {
			notes = append(notes, forcedNote+a)
		}
		return notes, len(accepted) > 0, nil
	}
	has, err := hasParts(s.dataDir)
	switch {
	case err != nil:
		return nil, false, err
	case !has:
		return nil, false, nil
	case !s.opts.Force:
		return nil, false, fmt.Errorf("open %s: %w: nothing says which settings made them; use --force to adopt them as made by this config, or choose a new output.dir",
			s.dir, ErrDataWithoutManifest)
	}
	return []string{forcedNote + "adopted shards of a directory without manifest"}, false, nil
}

// makeDirs makes data/ and errors/ durable and removes what an
// interrupted manifest rewrite left.
func (s *Sink) makeDirs() error {
	for _, d := range []string{s.dataDir, s.errDir} {
		step("mkdir", d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create output dir: %w", err)
		}
	}
	if err := disk.SyncDir(s.dir); err != nil {
		return err
	}
	removeManifestLeftovers(s.dir)
	return nil
}

// newManifest is the manifest this run writes at Open: the parts recovery
// found, the jobs the directory's records answer, and this run appended to
// the old manifest's runs.
func (s *Sink) newManifest(old *Manifest, rec *recovered, notes []string, forcedJob bool) *Manifest {
	opts := s.opts
	t := s.now().UTC()
	m := &Manifest{
		ManifestVersion: ManifestVersion,
		Version:         opts.Job.Version,
		CreatedAt:       t,
		JobHash:         opts.Job.Hash,
		Job:             opts.Job.Spec,
		Config:          opts.Job.Config,
		Limit:           opts.Job.Limit,
		Parts:           rec.parts,
	}
	held := s.done.Len() > 0 || s.failed.Len() > 0
	if old != nil {
		m.CreatedAt = old.CreatedAt
		m.Runs = old.Runs
		m.Jobs = maps.Clone(old.Jobs)
		if held && len(old.Job) > 0 {
			// The directory's records answer the manifest's job (a
			// manifest written before Jobs existed does not list it).
			m.addJob(old.Hash(), old.Job)
		}
		if forcedJob {
			// Until this run writes, the records are the old job's alone.
			m.JobHash, m.Job, m.Identity, m.Config, m.Limit = old.JobHash, old.Job, old.Identity, old.Config, old.Limit
			s.deferred = true
		}
	}
	if held && !s.deferred {
		m.addJob(opts.Job.Hash, opts.Job.Spec) // the same job as the records'
	}
	m.Runs = append(m.Runs, Run{
		StartedAt: t,
		Version:   opts.Job.Version,
		JobHash:   opts.Job.Hash,
		Limit:     opts.Job.Limit,
		Forced:    slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, forcedNote) }),
		Notes:     notes,
	})
	return m
}

func validate(o *Options) error {
	if o.Dir == "" {
		return errors.New("output.dir: empty")
	}
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	if o.PartSize <= 0 {
		return fmt.Errorf("output.shard_size: %d: want > 0", o.PartSize)
	}
	if o.SyncInterval < 0 {
		return fmt.Errorf("output.sync_interval: %v: want >= 0", o.SyncInterval)
	}
	return nil
}

// removeManifestLeftovers deletes temporaries of an interrupted manifest
// rewrite: the manifest itself is either the old or the new one.
func removeManifestLeftovers(dir string) {
	leftovers, _ := filepath.Glob(layout.Dir(dir).Leftovers(ManifestName))
	for _, p := range leftovers {
		step("remove", p)
		_ = os.Remove(p)
	}
}

// adopt records that this run writes: its job joins the manifest's Jobs,
// and a deferred job becomes the manifest's job, written before the first
// record so that no crash leaves records the manifest does not name.
func (s *Sink) adopt() error {
	if s.adopted {
		return nil
	}
	j := s.opts.Job
	s.man.addJob(j.Hash, j.Spec)
	if s.deferred {
		s.man.JobHash, s.man.Job, s.man.Identity, s.man.Config, s.man.Limit = j.Hash, j.Spec, nil, j.Config, j.Limit
		if err := writeManifest(s.dir, s.man); err != nil {
			return err
		}
		s.deferred = false
	}
	s.adopted = true
	return nil
}
