package sink

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Job is the job a run writes for, as its owner encodes it. The sink
// stores it in the manifest and leaves its meaning, and the decision whether
// a directory may be resumed by it, to that owner (Options.Check).
type Job struct {
	Spec    json.RawMessage // the job spec, stored as "job"
	Hash    string          // its identity, stored as "job_hash"
	Version string          // synthgen version
	Config  map[string]any  // effective config without secrets, stored for humans
	Limit   int64           // dataset.limit of this run (0 = all)
}

// Options configures Open.
type Options struct {
	Dir          string
	Format       string        // "jsonl" | "parquet": the format of new shards
	ShardSize    int           // records per shard
	SyncInterval time.Duration // fsync bound; 0 = fsync after every record
	Force        bool          // adopt shards without a manifest, or accept shards lost from disk
	Job          Job
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

	// done maps every key recovered at Open to the index of the shard
	// holding it (for recovery's duplicate check), and failed holds the
	// keys with a recovered error record. Neither changes after Open:
	// Recovered hands them to the goroutine that decides what to ask.
	done   map[Key]int32
	failed map[Key]struct{}
	// What this run wrote, owned by the writer like the files.
	written    map[Key]struct{}
	failedNow  map[Key]struct{} // keys with an error record written by this run
	failedOpen int              // failed keys (recovered or not) that are not done

	nextData int
	cur      *appendFile // data shard being filled; nil until the next Write
	curFinal string      // its final name
	curFmt   string
	curMin   Key
	curMax   Key

	nextErr  int
	errFile  *appendFile
	errFinal string

	log *shardLog // where finalizeShard lists a shard until Close compacts

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
	if err := checkOwnDir(opts.Dir); err != nil {
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
		dataDir:   filepath.Join(opts.Dir, "data"),
		errDir:    filepath.Join(opts.Dir, "errors"),
		done:      make(map[Key]int32),
		failed:    make(map[Key]struct{}),
		written:   make(map[Key]struct{}),
		failedNow: make(map[Key]struct{}),
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
	var notes []string
	forcedJob := false // Check accepted another job's directory
	if old != nil {
		// Checked before recovery touches anything: a mismatch is usually
		// the wrong output.dir, and that directory is not ours to change.
		if opts.Check != nil {
			accepted, err := opts.Check(old)
			if err != nil {
				return nil, err
			}
			for _, a := range accepted {
				notes = append(notes, forcedNote+a)
			}
			forcedJob = len(accepted) > 0
		}
	} else if has, err := hasShards(s.dataDir); err != nil {
		return nil, err
	} else if has {
		if !opts.Force {
			return nil, fmt.Errorf("open %s: %w: nothing says which settings made them; use --force to adopt them as made by this config, or choose a new output.dir",
				s.dir, ErrDataWithoutManifest)
		}
		notes = append(notes, forcedNote+"adopted shards of a directory without manifest")
	}
	for _, d := range []string{s.dataDir, s.errDir} {
		step("mkdir", d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create output dir: %w", err)
		}
	}
	if err := disk.SyncDir(s.dir); err != nil {
		return nil, err
	}
	removeManifestLeftovers(s.dir)

	rec, err := s.recover(old)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	notes = append(notes, rec.notes...)

	t := now().UTC()
	m := &Manifest{
		ManifestVersion: ManifestVersion,
		Version:         opts.Job.Version,
		CreatedAt:       t,
		JobHash:         opts.Job.Hash,
		Job:             opts.Job.Spec,
		Config:          opts.Job.Config,
		Limit:           opts.Job.Limit,
		Shards:          rec.shards,
	}
	held := len(s.done) > 0 || len(s.failed) > 0
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
	s.man = m
	s.run = len(m.Runs) - 1
	s.nextData = rec.nextData
	s.nextErr = rec.nextErr
	s.lastSync = now()
	// The compaction: the manifest lists every shard recovery found (the
	// old log's included) and names this run's log; only once that rename
	// is durable do the old logs go.
	m.ShardLog = shardLogName(s.run)
	s.log = &shardLog{path: filepath.Join(s.dir, m.ShardLog)}
	if err := writeManifest(s.dir, m); err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	if err := removeStaleShardLogs(s.dir, m.ShardLog); err != nil {
		return nil, fmt.Errorf("open %s: %w", s.dir, err)
	}
	opened = true
	return s, nil
}

func validate(o *Options) error {
	if o.Dir == "" {
		return errors.New("output.dir: empty")
	}
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	if o.ShardSize <= 0 {
		return fmt.Errorf("output.shard_size: %d: want > 0", o.ShardSize)
	}
	if o.SyncInterval < 0 {
		return fmt.Errorf("output.sync_interval: %v: want >= 0", o.SyncInterval)
	}
	return nil
}

// removeManifestLeftovers deletes temporaries of an interrupted manifest
// rewrite: the manifest itself is either the old or the new one.
func removeManifestLeftovers(dir string) {
	leftovers, _ := filepath.Glob(filepath.Join(dir, "."+ManifestName+".*"+suffixTmp))
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

// Done reports whether a record for k exists: recovered from disk at Open,
// or written by this Sink (durable after the next sync).
func (s *Sink) Done(k Key) bool {
	if _, ok := s.done[k]; ok {
		return true
	}
	_, ok := s.written[k]
	return ok
}

// Failed reports whether k has an error record and no record superseded it.
func (s *Sink) Failed(k Key) bool {
	return s.hasFailed(k) && !s.Done(k)
}

func (s *Sink) hasFailed(k Key) bool {
	if _, ok := s.failed[k]; ok {
		return true
	}
	_, ok := s.failedNow[k]
	return ok
}

// DoneCount is the number of done keys.
func (s *Sink) DoneCount() int { return len(s.done) + len(s.written) }

// Durable is how many records and error records this run wrote that are
// fsynced. Until a write fails it trails what Write and WriteError took by
// at most SyncInterval; after a failed write or fsync (a full disk) it is
// what the run can count as kept: lines written after the last successful
// fsync may be lost with the page cache (a resume finds what survived).
func (s *Sink) Durable() (records, errors int) { return s.durableRecs, s.durableErrs }

// FailedCount is the number of failed keys not superseded by a record.
func (s *Sink) FailedCount() int { return s.failedOpen }

// Recovered is what Open found on disk. It does not change afterwards, so
// the goroutine deciding which keys to ask reads it while the writer
// writes; what this run asks is that goroutine's own business.
func (s *Sink) Recovered() Recovered { return Recovered{done: s.done, failed: s.failed} }

// Recovered is the keys an output directory held when it was opened: those
// with a record, and those that failed for good.
type Recovered struct {
	done   map[Key]int32
	failed map[Key]struct{}
}

// Done reports whether k had a record.
func (r Recovered) Done(k Key) bool {
	_, ok := r.done[k]
	return ok
}

// Failed reports whether k had an error record and no record.
func (r Recovered) Failed(k Key) bool {
	_, ok := r.failed[k]
	return ok && !r.Done(k)
}

// Manifest returns a copy of the manifest as last written (for inspect and
// for tests); its slices are not shared with the Sink.
func (s *Sink) Manifest() Manifest {
	m := *s.man
	m.Shards = append([]ShardInfo(nil), m.Shards...)
	m.Runs = append([]Run(nil), m.Runs...)
	m.Jobs = maps.Clone(m.Jobs)
	return m
}

// Write appends r to the shard being filled, finalizes the shard when it
// reaches ShardSize, and fsyncs when SyncInterval has elapsed since the last
// sync (every record when it is 0). Writing a key that is already done is a
// bug in the caller: it is refused and nothing is written.
func (s *Sink) Write(r *Record) error {
	if err := s.usable(); err != nil {
		return err
	}
	k := r.Key()
	if err := s.acceptKey("write record", k); err != nil {
		return err
	}
	if err := s.adopt(); err != nil {
		return err
	}
	if s.cur == nil {
		if err := s.openShard(); err != nil {
			return s.fail(err)
		}
	}
	if err := s.cur.encode(r); err != nil {
		return s.fail(err)
	}
	s.written[k] = struct{}{}
	if s.hasFailed(k) {
		s.failedOpen--
	}
	if s.cur.lines == 1 || compareKeys(k, s.curMin) < 0 {
		s.curMin = k
	}
	if s.cur.lines == 1 || compareKeys(k, s.curMax) > 0 {
		s.curMax = k
	}
	s.man.Runs[s.run].RecordsWritten++
	if s.cur.lines >= s.opts.ShardSize {
		if err := s.finalizeShard(); err != nil {
			return s.fail(err)
		}
	}
	return s.maybeSync()
}

// acceptKey refuses what must never reach a shard: an id JSON would store
// as U+FFFD (a resume would read back another id, never see this key as
// done and write it again), and a key already done (a key is written once).
func (s *Sink) acceptKey(what string, k Key) error {
	if !utf8.ValidString(k.ID) {
		return fmt.Errorf("%s id=%q sample=%d: id is not valid UTF-8", what, k.ID, k.Sample)
	}
	if s.Done(k) {
		return fmt.Errorf("%s id=%q sample=%d: already done: a key is written once", what, k.ID, k.Sample)
	}
	return nil
}

// WriteError appends e under DIR/errors. A key may fail on several runs
// (with RetryErrors); all its error records are kept. An error for a done
// key is a bug in the caller and is refused.
func (s *Sink) WriteError(e *ErrorRecord) error {
	if err := s.usable(); err != nil {
		return err
	}
	k := e.Key()
	if err := s.acceptKey("write error", k); err != nil {
		return err
	}
	if err := s.adopt(); err != nil {
		return err
	}
	if s.errFile == nil {
		name := shardName(s.nextErr, FormatJSONL)
		f, err := createAppendFile(filepath.Join(s.errDir, name+suffixOpen))
		if err != nil {
			return s.fail(err)
		}
		f.onSync = func(n int) { s.durableErrs += n }
		s.errFile, s.errFinal = f, filepath.Join(s.errDir, name)
	}
	if err := s.errFile.encode(e); err != nil {
		return s.fail(err)
	}
	if !s.hasFailed(k) {
		s.failedNow[k] = struct{}{}
		s.failedOpen++
	}
	s.man.Runs[s.run].ErrorsWritten++
	if s.errFile.lines >= s.opts.ShardSize {
		if err := s.finalizeErrors(); err != nil {
			return s.fail(err)
		}
	}
	return s.maybeSync()
}

// Flush fsyncs everything written so far. The owner calls it every
// SyncInterval so that the tail is durable even when no record arrives.
func (s *Sink) Flush() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.syncAll()
}

// SetOutcome records how this run ended (see Run.Outcome); Close writes it
// to the manifest with the run's end. Called by the writer's owner once
// writing is over.
func (s *Sink) SetOutcome(outcome string) { s.man.Runs[s.run].Outcome = outcome }

// Close finalizes the open shards (no temporary file remains after a clean
// exit), records the run's end in the manifest and releases the directory.
// After a write error it only releases the files: the temporaries stay for
// the next Open to recover.
func (s *Sink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	defer s.lock.Close()
	defer s.log.close()
	if s.err != nil {
		if s.cur != nil {
			_ = s.cur.f.Close()
		}
		if s.errFile != nil {
			_ = s.errFile.f.Close()
		}
		return fmt.Errorf("close %s: %w", s.dir, s.err)
	}
	if s.cur != nil {
		if err := s.finalizeShard(); err != nil {
			return fmt.Errorf("close %s: %w", s.dir, err)
		}
	}
	if s.errFile != nil {
		if err := s.finalizeErrors(); err != nil {
			return fmt.Errorf("close %s: %w", s.dir, err)
		}
	}
	t := s.now().UTC()
	s.man.Runs[s.run].EndedAt = &t
	// The compaction: the log's shards join the manifest's list, and the
	// log goes once that rename is durable (writeManifest fsyncs DIR).
	s.man.ShardLog = ""
	if err := writeManifest(s.dir, s.man); err != nil {
		return fmt.Errorf("close %s: %w", s.dir, err)
	}
	s.log.close()
	if err := removeStaleShardLogs(s.dir, ""); err != nil {
		return fmt.Errorf("close %s: %w", s.dir, err)
	}
	return nil
}

func (s *Sink) usable() error {
	if s.closed {
		return errors.New("sink is closed")
	}
	return s.err
}

// fail makes err sticky: a file may now end in a partial line, and only the
// recovery of the next Open may decide what it holds.
func (s *Sink) fail(err error) error {
	s.err = err
	return err
}

func (s *Sink) openShard() error {
	name := shardName(s.nextData, s.opts.Format)
	f, err := createAppendFile(filepath.Join(s.dataDir, name+tempSuffix(s.opts.Format)))
	if err != nil {
		return err
	}
	f.onSync = func(n int) { s.durableRecs += n }
	s.cur, s.curFinal, s.curFmt = f, filepath.Join(s.dataDir, name), s.opts.Format
	return nil
}

// finalizeShard turns the shard being filled into a final file and lists it
// in the shard log: one line, whatever the number of shards before it. If
// the append fails after the rename, the shard is still complete and the
// next Open adopts it.
func (s *Sink) finalizeShard() error {
	cur := s.cur
	s.cur = nil
	if err := cur.close(); err != nil {
		return err
	}
	if convert := formats[s.curFmt].convert; convert != nil {
		rows, err := convert(cur.path, s.curFinal)
		if err != nil {
			return err
		}
		if rows != cur.lines {
			return fmt.Errorf("convert %s: %d rows, want %d", cur.path, rows, cur.lines)
		}
	} else {
		step("rename", cur.path)
		if err := os.Rename(cur.path, s.curFinal); err != nil {
			return fmt.Errorf("finalize shard: %w", err)
		}
		if err := disk.SyncDir(s.dataDir); err != nil {
			return err
		}
	}
	s.nextData++
	info := ShardInfo{
		Name:    filepath.Base(s.curFinal),
		Format:  s.curFmt,
		Records: cur.lines,
		FirstID: s.curMin.ID,
		LastID:  s.curMax.ID,
	}
	if err := stampShard(s.curFinal, &info); err != nil {
		return err
	}
	s.man.Shards = append(s.man.Shards, info)
	return s.log.append(&info)
}

func (s *Sink) finalizeErrors() error {
	f := s.errFile
	s.errFile = nil
	if err := f.close(); err != nil {
		return err
	}
	step("rename", f.path)
	if err := os.Rename(f.path, s.errFinal); err != nil {
		return fmt.Errorf("finalize errors shard: %w", err)
	}
	s.nextErr++
	return disk.SyncDir(s.errDir)
}

func (s *Sink) maybeSync() error {
	if s.opts.SyncInterval > 0 && s.now().Sub(s.lastSync) < s.opts.SyncInterval {
		return nil
	}
	return s.syncAll()
}

func (s *Sink) syncAll() error {
	for _, f := range []*appendFile{s.cur, s.errFile} {
		if f == nil {
			continue
		}
		if err := f.sync(); err != nil {
			return s.fail(err)
		}
	}
	s.lastSync = s.now()
	return nil
}

// shardName is the final file name of shard i: part-000007.jsonl.
func shardName(i int, format string) string {
	return fmt.Sprintf("part-%06d.%s", i, format)
}

// compareKeys orders keys by id, then sample. Decimal ids (row indices)
// compare as numbers so that "10" follows "9"; other ids as strings.
func compareKeys(a, b Key) int {
	if c := compareIDs(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Sample, b.Sample)
}

func compareIDs(a, b string) int {
	if isDecimal(a) && isDecimal(b) {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			return len(a) - len(b)
		}
	}
	return strings.Compare(a, b)
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkOwnDir refuses an output directory that is not the sink's to fill:
// the filesystem root (data/ and errors/ would land beside the system's),
// or a directory that already holds files and nothing of a synthgen output
// (the wrong path, say /data instead of /data/synth/run1).
func checkOwnDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("output.dir %s: %w", dir, err)
	}
	if filepath.Dir(abs) == abs {
		return fmt.Errorf("output.dir %s is the filesystem root: give the run a directory of its own, e.g. /data/synth/run1", dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output.dir %s: %w", dir, err)
	}
	var other []string
	for _, e := range entries {
		switch name := e.Name(); {
		case name == ManifestName || name == "data" || name == "errors":
			return nil // a synthgen output (recovery decides what it holds)
		case name == LockName || name == "status.json" || name == "report.json" || isShardLog(name) || strings.HasPrefix(name, "."):
		default:
			other = append(other, name)
		}
	}
	if len(other) == 0 {
		return nil
	}
	shown := other
	if len(shown) > 5 {
		shown = append(slices.Clone(shown[:5]), fmt.Sprintf("... %d in all", len(other)))
	}
	return fmt.Errorf("output.dir %s already holds %s and is not a synthgen output: choose a new or empty directory", dir, strings.Join(shown, ", "))
}
