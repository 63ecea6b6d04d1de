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
	"reflect"
	"slices"
	"strings"
	"time"
)

// Inspect reads an output directory the way a person auditing it would:
// every record of every shard in full, not only the keys that resume needs.
// It never changes anything (no recovery, no rename, no truncation, no lock),
// so it is safe while a run is writing the directory: temporaries (.open,
// .journal) are read up to their last complete line and reported as open.

// Shard states in a ShardReport.
const (
	ShardOK       = "ok"       // a final shard that reads in full
	ShardOpen     = "open"     // .open/.journal: being appended, or left by a crash (the next run recovers it)
	ShardInvalid  = "invalid"  // does not read: see Problem
	ShardLeftover = "leftover" // .tmp of a cut Parquet conversion, or a journal whose final shard exists
)

// Report is what Inspect found in one output directory, or what Combine
// found in several read as one dataset. Its exported fields are the JSON
// of `synthgen inspect --json`.
type Report struct {
	Dir        string           `json:"dir,omitempty"`
	Dirs       []string         `json:"dirs,omitempty"` // Combine only
	Manifest   *ManifestSummary `json:"manifest,omitempty"`
	Shards     []ShardReport    `json:"shards,omitempty"`
	Records    int64            `json:"records"`       // readable records in valid and open shards, copies included
	Distinct   int64            `json:"distinct_keys"` // distinct (id, sample) among them
	Duplicates []Duplicate      `json:"duplicates"`
	Errors     ErrorSummary     `json:"errors"`

	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	FinishReasons    map[string]int64 `json:"finish_reasons"`
	TruncatedShare   float64          `json:"truncated_share"` // finish_reason "length" / records
	// Records with no reasoning, and records with think tags in content:
	// both most of the records is the mark of a server without a
	// reasoning parser (the thought inside content).
	EmptyReasoning      int64   `json:"empty_reasoning"`
	EmptyReasoningShare float64 `json:"empty_reasoning_share"` // of records
	ThinkTags           int64   `json:"think_tags"`
	ThinkTagsShare      float64 `json:"think_tags_share"` // of records

	// Problems make the directory invalid: a run would refuse it, or the
	// dataset holds something twice. Each says what to do.
	Problems []string `json:"problems"`
	// Notes are worth knowing but need no action.
	Notes []string `json:"notes,omitempty"`

	// The key index, kept for Has, Failed and Combine; not serialized. It
	// holds a key's 128-bit fingerprint (fingerprintOf), not its id: a
	// directory of millions of records would otherwise keep every id
	// string on the heap. Two keys with one fingerprint would count as one
	// (a duplicate or a missing key): the birthday bound gives a
	// probability of about n^2/2^129, 1.5e-26 for 10^9 keys.
	keys  map[fingerprint]int32   // -> index in files of the first file holding it
	extra map[fingerprint]*dupKey // a key held more than once
	files []string                // paths of the data files that gave keys
	// readAs is the format each of files was read as: JSONL for a
	// temporary file, whatever the shard's format.
	readAs []string
	// failed keeps the keys themselves: error records are normally few,
	// and Failed is asked for keys that have no record.
	failed map[Key]string // key with an error record -> cause of its last one
}

// dupKey is a key held by more than one file: the key itself (kept only
// for these, to name them) and the files after the first.
type dupKey struct {
	key   Key
	named bool // key is set; false only inside Combine, until it is looked up
	more  []int32
}

// ManifestSummary is the part of manifest.json a person checks.
type ManifestSummary struct {
	ManifestVersion int             `json:"manifest_version"` // 0: version 1
	Version         string          `json:"version"`
	CreatedAt       time.Time       `json:"created_at"`
	JobHash         string          `json:"job_hash"`
	Job             json.RawMessage `json:"job,omitempty"`
	// Jobs are the specs of every job that wrote into the directory, by
	// hash: more than one when forced runs mixed jobs.
	Jobs    map[string]json.RawMessage `json:"jobs,omitempty"`
	Legacy  *LegacyIdentity            `json:"identity,omitempty"` // version 1's job
	Config  map[string]any             `json:"config,omitempty"`
	Limit   int64                      `json:"limit"`
	Shards  int                        `json:"shards"`  // listed
	Records int64                      `json:"records"` // sum of the listed shards' records
	Runs    []Run                      `json:"runs"`
}

// ShardReport is one file of DIR/data.
type ShardReport struct {
	Name    string `json:"name"` // file name under DIR/data
	Format  string `json:"format"`
	State   string `json:"state"` // ShardOK, ShardOpen, ShardInvalid or ShardLeftover
	Records int    `json:"records"`
	Valid   bool   `json:"valid"`
	Listed  bool   `json:"listed"` // in the manifest
	Problem string `json:"problem,omitempty"`
}

// Duplicate is a key present more than once; Files are paths, one per copy.
type Duplicate struct {
	ID     string   `json:"id"`
	Sample int      `json:"sample"`
	Files  []string `json:"files"`
}

// ErrorSummary counts DIR/errors. Open keys failed for good: they have an
// error record and no record supersedes it.
type ErrorSummary struct {
	Records int64          `json:"records"`
	Keys    int            `json:"keys"`
	Open    int            `json:"open"`
	ByCause map[string]int `json:"by_cause"` // open keys by the cause of their last error
}

// OK reports whether nothing is invalid.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Has reports whether a readable record for k is in the directory.
func (r *Report) Has(k Key) bool {
	_, ok := r.keys[fingerprintOf(k)]
	return ok
}

// Failed reports whether k failed for good: an error record and no record.
func (r *Report) Failed(k Key) bool {
	_, ok := r.failed[k]
	return ok && !r.Has(k)
}

// InvalidShards returns the names of the shards that do not read.
func (r *Report) InvalidShards() []string {
	var out []string
	for _, sh := range r.Shards {
		if !sh.Valid {
			out = append(out, sh.Name)
		}
	}
	return out
}

// errVanished means a temporary file was renamed or removed between the
// directory listing and its reading: a writer finalized it. Inspect starts
// over, as a person would run the command again.
var errVanished = errors.New("file vanished while reading")

// inspectAttempts bounds the restarts on errVanished: a shard is finalized
// at most every few seconds, so a second listing nearly always settles.
const inspectAttempts = 5

// Inspect reads dir (see the top of this file). It returns an error only
// when dir is not an output directory or cannot be read at all; what is
// wrong inside it is in Report.Problems.
func Inspect(dir string) (*Report, error) {
	for attempt := 1; ; attempt++ {
		r, err := inspectOnce(dir)
		if errors.Is(err, errVanished) {
			if attempt < inspectAttempts {
				continue
			}
			return nil, fmt.Errorf("inspect %s: shards kept moving while read (%d tries): %w", dir, attempt, err)
		}
		return r, err
	}
}

// newReport is an empty report of dir: its lists and maps are empty, not
// nil, so that the JSON form shows [] and {} rather than null.
func newReport(dir string) *Report {
	return &Report{
		Dir:           dir,
		Duplicates:    []Duplicate{},
		Problems:      []string{},
		FinishReasons: map[string]int64{},
		Errors:        ErrorSummary{ByCause: map[string]int{}},
		keys:          map[fingerprint]int32{},
		extra:         map[fingerprint]*dupKey{},
		failed:        map[Key]string{},
	}
}

func inspectOnce(dir string) (*Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("inspect %s: not a directory", dir)
	}
	r := newReport(dir)
	// The manifest first: a writer renames a shard into place before it
	// lists it, so every shard this manifest lists is on disk by the time
	// of the listing below, even if the run moves on in between.
	man, err := ReadManifest(dir)
	missing := errors.Is(err, fs.ErrNotExist)
	switch {
	case missing:
		man = nil
	case err != nil:
		r.problem("%s does not parse (%v): the run refuses the directory; restore it from a copy, or move it away and rerun with --force to adopt the shards", filepath.Join(dir, ManifestName), err)
		man = nil
	}
	if man != nil {
		r.Manifest = summarize(man)
	}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if isShardLog(e.Name()) && (man == nil || e.Name() != man.ShardLog) {
				r.note("%s is a shard log %s does not name: folded into it before a crash, or its run died before naming it; the next run removes it", e.Name(), ManifestName)
			}
		}
	}

	dataDir := filepath.Join(dir, "data")
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		if man == nil {
			return nil, fmt.Errorf("inspect %s: not a synthgen output directory (no %s, no data/)", dir, ManifestName)
		}
		entries = nil
	} else if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", dir, err)
	}
	if err := r.readData(dataDir, entries); err != nil {
		return nil, err
	}
	if missing && len(r.Shards) > 0 {
		r.problem("%s is missing: nothing says which settings made these shards; a run refuses them unless --force adopts them as made by its config", filepath.Join(dir, ManifestName))
	}
	if man != nil {
		r.reconcile(man)
	}
	if err := r.readErrors(filepath.Join(dir, "errors")); err != nil {
		return nil, err
	}
	r.finish()
	return r, nil
}

func summarize(m *Manifest) *ManifestSummary {
	s := &ManifestSummary{
		ManifestVersion: m.ManifestVersion,
		Version:         m.Version,
		CreatedAt:       m.CreatedAt,
		JobHash:         m.Hash(),
		Job:             m.Job,
		Jobs:            m.Jobs,
		Legacy:          m.Identity,
		Config:          m.Config,
		Limit:           m.Limit,
		Shards:          len(m.Shards),
		Runs:            m.Runs,
	}
	if s.Config == nil && m.Identity != nil {
		s.Config = m.Identity.Config
	}
	for _, sh := range m.Shards {
		s.Records += int64(sh.Records)
	}
	return s
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// reconcile compares the shards on disk with the manifest's list, the way
// a run's recovery does, so that what would stop a run shows here first.
func (r *Report) reconcile(m *Manifest) {
	onDisk := map[string]*ShardReport{}
	for i := range r.Shards {
		onDisk[r.Shards[i].Name] = &r.Shards[i]
	}
	listed := map[string]bool{}
	dataDir := filepath.Join(r.Dir, "data")
	for _, ms := range m.Shards {
		listed[ms.Name] = true
		sh, ok := onDisk[ms.Name]
		if !ok {
			r.problem("%s is listed in the manifest (%d records) but missing: restore it, or rerun with --force to generate its records again",
				filepath.Join(dataDir, ms.Name), ms.Records)
			continue
		}
		sh.Listed = true
		if sh.Valid && sh.Records != ms.Records {
			r.problem("%s holds %d records, the manifest says %d: it changed after it was written; restore it, or rerun with --force to accept what is on disk",
				filepath.Join(dataDir, ms.Name), sh.Records, ms.Records)
			continue
		}
		if len(ms.Keys) > 0 && sh.Valid {
			r.checkSummary(filepath.Join(dataDir, ms.Name), ms)
		}
		if ms.XXH64 == "" || !sh.Valid {
			continue // nothing recorded, or already reported as unreadable
		}
		// inspect reads every byte anyway: the hash is checked whatever
		// the modification time says.
		path := filepath.Join(dataDir, ms.Name)
		if _, _, sum, err := fileStamp(path); err == nil && sum != ms.XXH64 {
			sh.Valid, sh.State, sh.Problem = false, ShardInvalid, "bytes changed after it was written"
			r.problem("%s: its bytes changed after it was written (xxh64 %s, %s when written): restore it from a copy, or move it out of data/ and rerun with --force to generate its records again",
				path, sum, ms.XXH64)
		}
	}
	for _, sh := range r.Shards {
		if sh.State == ShardOK && !listed[sh.Name] {
			r.note("%s (%d records) is not in the manifest yet: finalized after the manifest was read, or before a crash; a run adopts it", sh.Name, sh.Records)
		}
	}
	if n := len(m.Runs); n > 0 && m.Runs[n-1].EndedAt == nil {
		r.note("run %d has not ended: it is running now, or it stopped without closing (the next run recovers the directory)", n)
	}
}

// checkSummary compares a shard's key summary (which a resume trusts for
// an unchanged file instead of reading it) with the keys the file holds.
func (r *Report) checkSummary(path string, ms ShardInfo) {
	var c keySummary
	n, err := formats[ms.Format].keys(path, func(k Key, _ int) error {
		c.add(k)
		return nil
	})
	if err != nil {
		return // reported as unreadable already
	}
	if got := c.summary(n); !reflect.DeepEqual(got, ms.Keys) {
		r.problem("%s: the manifest's key summary (\"keys\") does not list the keys the shard holds, and a resume takes an unchanged shard's keys from it: delete that shard's \"keys\" from %s (the next run reads the shard and writes it again)",
			path, filepath.Join(r.Dir, ManifestName))
	}
}

// SortedFinishReasons returns the finish reasons by count, largest first.
func (r *Report) SortedFinishReasons() []string {
	return slices.SortedFunc(maps.Keys(r.FinishReasons), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.FinishReasons[b], r.FinishReasons[a]), strings.Compare(a, b))
	})
}
