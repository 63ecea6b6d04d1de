// Package audit reads synthgen output directories the way a person auditing
// them would: every record of every part in full, not only the keys that a
// resume needs, checked against the manifest, with what is wrong and what to
// do about it. `synthgen inspect` prints what it finds, and `synthgen
// export` refuses directories it finds invalid.
//
// An audit never changes anything (no recovery, no rename, no truncation,
// no lock), so it is safe while a run is writing the directory: temporaries
// (.open, .journal) are read up to their last complete line and reported as
// open. The directory's files are the sink's (package sink), read through
// its readers.
package audit

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

	"github.com/synthgen/synthgen/internal/extsort"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// Part states in a Part.
const (
	PartOK       = "ok"       // a final part that reads in full
	PartOpen     = "open"     // .open/.journal: being appended, or left by a crash (the next run recovers it)
	PartInvalid  = "invalid"  // does not read: see Problem
	PartLeftover = "leftover" // .tmp of a cut Parquet conversion, or a journal whose final part exists
)

// Audit is what Dir found in one output directory, or what Combine found
// in several read as one dataset. Its exported fields are the JSON of a
// directory in `synthgen inspect --json`.
type Audit struct {
	Dir      string           `json:"dir,omitempty"`
	Dirs     []string         `json:"dirs,omitempty"` // Combine only
	Manifest *ManifestSummary `json:"manifest,omitempty"`
	Parts    []Part           `json:"shards,omitempty"`
	Records  int64            `json:"records"`       // readable records in valid and open parts, copies included
	Distinct int64            `json:"distinct_keys"` // distinct (id, sample) among them
	// Duplicates are the keys held more than once, by key, the first
	// maxListed of them; DuplicateKeys counts them all.
	Duplicates    []Duplicate  `json:"duplicates"`
	DuplicateKeys int64        `json:"duplicate_keys"`
	Errors        ErrorSummary `json:"errors"`

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
	// CachedTokens and Cost are the records' sums (each record's from its
	// usage at endpoint.price); absent when none has any.
	CachedTokens int64   `json:"cached_tokens,omitempty"`
	Cost         float64 `json:"cost,omitempty"`
	ToolCounts           // the answers' tool calls (tools.go)

	// Problems make the directory invalid: a run would refuse it, or the
	// dataset holds something twice. Each says what to do.
	Problems []string `json:"problems"`
	// Notes are worth knowing but need no action.
	Notes []string `json:"notes,omitempty"`

	// The key index (keys.go), not serialized: a directory's keys with
	// the index in files of the file holding each, sorted on disk; a
	// combination's are its directories' (of), merged.
	index *extsort.Sorter[keyEntry]
	of    []*Audit
	files []string // paths of the data files that gave keys
	// readAs is the format each of files was read as: JSONL for a
	// temporary file, whatever the part's format.
	readAs []string
	// failed keeps the keys with an error record: they are normally few,
	// and Failed is asked for keys that have no record.
	failed map[sink.Key]failure
	dups   *dupGroups // the sets of files sharing keys, for Problems
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
	Legacy  *sink.LegacyIdentity       `json:"identity,omitempty"` // version 1's job
	Config  map[string]any             `json:"config,omitempty"`
	Limit   int64                      `json:"limit"`
	Parts   int                        `json:"shards"`  // listed
	Records int64                      `json:"records"` // sum of the listed parts' records
	Runs    []sink.Run                 `json:"runs"`
}

// Part is one file of DIR/data.
type Part struct {
	Name    string `json:"name"` // file name under DIR/data
	Format  string `json:"format"`
	State   string `json:"state"` // PartOK, PartOpen, PartInvalid or PartLeftover
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
func (a *Audit) OK() bool { return len(a.Problems) == 0 }

// Failed reports whether k failed for good: an error record and no record.
func (a *Audit) Failed(k sink.Key) bool {
	f, ok := a.failed[k]
	return ok && !f.held
}

// Files returns the data files whose records the audit counted (valid
// parts, open ones included), in the order they were read. Leftovers,
// invalid parts and parts without records are not among them.
func (a *Audit) Files() []string { return slices.Clone(a.files) }

// InvalidParts returns the names of the parts that do not read.
func (a *Audit) InvalidParts() []string {
	var out []string
	for _, sh := range a.Parts {
		if !sh.Valid {
			out = append(out, sh.Name)
		}
	}
	return out
}

// SortedFinishReasons returns the finish reasons by count, largest first.
func (a *Audit) SortedFinishReasons() []string {
	return slices.SortedFunc(maps.Keys(a.FinishReasons), func(x, y string) int {
		return cmp.Or(cmp.Compare(a.FinishReasons[y], a.FinishReasons[x]), strings.Compare(x, y))
	})
}

// errVanished means a temporary file was renamed or removed between the
// directory listing and its reading: a writer finalized it. Dir starts
// over, as a person would run the command again.
var errVanished = errors.New("file vanished while reading")

// readAttempts bounds the restarts on errVanished: a part is finalized
// at most every few seconds, so a second listing nearly always settles.
const readAttempts = 5

// Dir audits the output directory dir (see the package comment). It
// returns an error only when dir is not an output directory or cannot be
// read at all; what is wrong inside it is in Audit.Problems.
func Dir(dir string) (*Audit, error) { return DirIn("", dir) }

// DirIn is Dir with the key index spilling its sorted runs into tmp (""
// is the system's temporary directory, TMPDIR): export puts them beside
// its output.
func DirIn(tmp, dir string) (*Audit, error) {
	for attempt := 1; ; attempt++ {
		a, err := readOnce(tmp, dir)
		if err != nil {
			closeIndex(a)
		}
		if errors.Is(err, errVanished) {
			if attempt < readAttempts {
				continue
			}
			return nil, fmt.Errorf("inspect %s: shards kept moving while read (%d tries): %w", dir, attempt, err)
		}
		return a, err
	}
}

// newAudit is an empty audit of dir: its lists and maps are empty, not
// nil, so that the JSON form shows [] and {} rather than null.
func newAudit(dir string) *Audit {
	return &Audit{
		Dir:           dir,
		Duplicates:    []Duplicate{},
		Problems:      []string{},
		FinishReasons: map[string]int64{},
		Errors:        ErrorSummary{ByCause: map[string]int{}},
		failed:        map[sink.Key]failure{},
	}
}

func readOnce(tmp, dir string) (*Audit, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("inspect %s: not a directory", dir)
	}
	a := newAudit(dir)
	a.index = newKeySorter(tmp)
	// The manifest first: a writer renames a part into place before it
	// lists it, so every part this manifest lists is on disk by the time
	// of the listing below, even if the run moves on in between.
	man, err := sink.ReadManifest(dir)
	missing := errors.Is(err, fs.ErrNotExist)
	switch {
	case missing:
		man = nil
	case err != nil:
		a.problem("%s does not parse (%v): the run refuses the directory; restore it from a copy, or move it away and rerun with --force to adopt the shards", filepath.Join(dir, sink.ManifestName), err)
		man = nil
	}
	if man != nil {
		a.Manifest = summarize(man)
	}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if sink.IsPartLog(e.Name()) && (man == nil || e.Name() != man.PartLog) {
				a.note("%s is a shard log %s does not name: folded into it before a crash, or its run died before naming it; the next run removes it", e.Name(), sink.ManifestName)
			}
		}
	}

	dataDir := layout.Dir(dir).Data()
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		if man == nil {
			return nil, fmt.Errorf("inspect %s: not a synthgen output directory (no %s, no data/)", dir, sink.ManifestName)
		}
		entries = nil
	} else if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", dir, err)
	}
	if err := a.readData(dataDir, entries); err != nil {
		return a, err
	}
	if missing && len(a.Parts) > 0 {
		a.problem("%s is missing: nothing says which settings made these shards; a run refuses them unless --force adopts them as made by its config", filepath.Join(dir, sink.ManifestName))
	}
	if man != nil {
		a.reconcile(man)
	}
	if err := a.readErrors(layout.Dir(dir).Errors()); err != nil {
		return a, err
	}
	if err := a.index.Freeze(); err != nil {
		return a, fmt.Errorf("inspect %s: key index: %w", dir, err)
	}
	if err := a.finish(); err != nil {
		return a, fmt.Errorf("inspect %s: key index: %w", dir, err)
	}
	return a, nil
}

func summarize(m *sink.Manifest) *ManifestSummary {
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
		Parts:           len(m.Parts),
		Runs:            m.Runs,
	}
	if s.Config == nil && m.Identity != nil {
		s.Config = m.Identity.Config
	}
	for _, sh := range m.Parts {
		s.Records += int64(sh.Records)
	}
	return s
}

func (a *Audit) problem(format string, args ...any) {
	a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
}

func (a *Audit) note(format string, args ...any) {
	a.Notes = append(a.Notes, fmt.Sprintf(format, args...))
}

// reconcile compares the parts on disk with the manifest's list, the way
// a run's recovery does, so that what would stop a run shows here first.
func (a *Audit) reconcile(m *sink.Manifest) {
	onDisk := map[string]*Part{}
	for i := range a.Parts {
		onDisk[a.Parts[i].Name] = &a.Parts[i]
	}
	listed := map[string]bool{}
	dataDir := layout.Dir(a.Dir).Data()
	for _, ms := range m.Parts {
		listed[ms.Name] = true
		sh, ok := onDisk[ms.Name]
		if !ok {
			a.problem("%s is listed in the manifest (%d records) but missing: restore it, or rerun with --force to generate its records again",
				filepath.Join(dataDir, ms.Name), ms.Records)
			continue
		}
		sh.Listed = true
		if sh.Valid && sh.Records != ms.Records {
			a.problem("%s holds %d records, the manifest says %d: it changed after it was written; restore it, or rerun with --force to accept what is on disk",
				filepath.Join(dataDir, ms.Name), sh.Records, ms.Records)
			continue
		}
		if len(ms.Keys) > 0 && sh.Valid {
			a.checkSummary(filepath.Join(dataDir, ms.Name), ms)
		}
		if ms.XXH64 == "" || !sh.Valid {
			continue // nothing recorded, or already reported as unreadable
		}
		// The audit reads every byte anyway: the hash is checked whatever
		// the modification time says.
		path := filepath.Join(dataDir, ms.Name)
		if sum, err := sink.PartHash(path); err == nil && sum != ms.XXH64 {
			sh.Valid, sh.State, sh.Problem = false, PartInvalid, "bytes changed after it was written"
			a.problem("%s: its bytes changed after it was written (xxh64 %s, %s when written): restore it from a copy, or move it out of data/ and rerun with --force to generate its records again",
				path, sum, ms.XXH64)
		}
	}
	for _, sh := range a.Parts {
		if sh.State == PartOK && !listed[sh.Name] {
			a.note("%s (%d records) is not in the manifest yet: finalized after the manifest was read, or before a crash; a run adopts it", sh.Name, sh.Records)
		}
	}
	if n := len(m.Runs); n > 0 && m.Runs[n-1].EndedAt == nil {
		a.note("run %d has not ended: it is running now, or it stopped without closing (the next run recovers the directory)", n)
	}
}

// checkSummary compares a part's key summary (which a resume trusts for
// an unchanged file instead of reading it) with the keys the file holds.
func (a *Audit) checkSummary(path string, ms sink.PartInfo) {
	got, err := sink.SummarizeKeys(path, ms.Format)
	if err != nil {
		return // reported as unreadable already (or a format no sink writes)
	}
	if !reflect.DeepEqual(got, ms.Keys) {
		a.problem("%s: the manifest's key summary (\"keys\") does not list the keys the shard holds, and a resume takes an unchanged shard's keys from it: delete that shard's \"keys\" from %s (the next run reads the shard and writes it again)",
			path, filepath.Join(a.Dir, sink.ManifestName))
	}
}
