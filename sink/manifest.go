package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/synthgen/synthgen/sink/keyset"
	"github.com/synthgen/synthgen/sink/layout"
)

// ManifestName is the manifest's file name inside the output directory
// (layout's name, kept here for the sink's callers).
const ManifestName = layout.ManifestName

// ManifestVersion is the version of manifest.json this code writes. Version
// 1 (no manifest_version field) held the job as a map of setting strings
// under "identity"; version 2 holds the typed job spec under "job". Both
// are read.
const ManifestVersion = 2

// Manifest is DIR/manifest.json: what made the directory and what it holds.
// It is rewritten atomically on Open, on Close and when a forced run takes
// the job over; a part finalized in between is appended to the part log
// it names (see partlog.go), and ReadManifest reads both. It is a summary for people and for the job check; the parts on disk stay
// the truth about which keys are done.
type Manifest struct {
	ManifestVersion int       `json:"manifest_version"` // 0 when read from a version 1 file
	Version         string    `json:"version"`          // synthgen version that last wrote the manifest
	CreatedAt       time.Time `json:"created_at"`
	// JobHash and Job are the job the directory's records answer, as its
	// owner (package generator) encodes it; the sink stores them and leaves
	// their meaning to that owner. It is the job of the latest run that
	// wrote a record or an error record (or of the first run): a run that
	// --force let in takes it over only with its first record, so a forced
	// run that writes nothing leaves it as it was.
	JobHash string          `json:"job_hash,omitempty"`
	Job     json.RawMessage `json:"job,omitempty"`
	// Jobs holds the spec of every job that wrote records or error
	// records into the directory, by hash: more than one when a forced
	// run wrote into another job's directory. Each run names its own in
	// Runs[i].JobHash.
	Jobs map[string]json.RawMessage `json:"jobs,omitempty"`
	// Config is the effective configuration of the run that set Job,
	// without secrets, for people.
	Config map[string]any `json:"config,omitempty"`
	// Identity is version 1's record of the job, read so that directories
	// written before version 2 resume; it is not written any more.
	Identity *LegacyIdentity `json:"identity,omitempty"`
	Limit    int64           `json:"limit"` // dataset.limit of the run that set Job (0 = all)
	Parts    []PartInfo      `json:"shards"`
	// PartLog names the file beside manifest.json that the running (or
	// killed) run appends its finalized parts to: they continue Parts.
	// Empty after a clean Close, and in manifests from before the log.
	PartLog string `json:"shard_log,omitempty"`
	Runs    []Run  `json:"runs"`
}

// addJob lists spec under hash in Jobs (an empty hash: a job its owner
// does not name, as in some tests, is not listed).
func (m *Manifest) addJob(hash string, spec json.RawMessage) {
	if hash == "" || len(spec) == 0 {
		return
	}
	if m.Jobs == nil {
		m.Jobs = map[string]json.RawMessage{}
	}
	m.Jobs[hash] = spec
}

// LegacyIdentity is version 1's job: the answer-changing settings as
// strings (hashed into Hash) and the config.
type LegacyIdentity struct {
	Hash   string            `json:"hash"`
	Answer map[string]string `json:"answer"`
	Config map[string]any    `json:"config,omitempty"`
}

// Hash is the hash of the job the directory answers, whichever version
// wrote the manifest.
func (m *Manifest) Hash() string {
	if m.JobHash == "" && m.Identity != nil {
		return m.Identity.Hash
	}
	return m.JobHash
}

// PartInfo describes one final data part. FirstID and LastID are the ids of
// the smallest and largest key in the part (decimal ids compare as numbers),
// not the first and last rows: answers arrive in completion order.
type PartInfo struct {
	Name    string `json:"name"`   // file name under DIR/data
	Format  string `json:"format"` // "jsonl" | "parquet"
	Records int    `json:"records"`
	FirstID string `json:"first_id"`
	LastID  string `json:"last_id"`
	// Size, ModTime and XXH64 are the final file as it was written (empty
	// in manifests from before they were recorded). A resume compares the
	// size and, when the modification time moved (a copy), the hash; a
	// part whose bytes changed after it was written is refused, since
	// resume reads only its keys and would take damaged records for done.
	Size    int64     `json:"size,omitempty"`
	ModTime time.Time `json:"mod_time,omitzero"`
	XXH64   string    `json:"xxh64,omitempty"`
	// Keys lists the part's keys when all its ids are row indices
	// (keyset.Summary): a resume that finds the file unchanged reads them
	// here instead of the file. Absent for other ids, in manifests from
	// before it, and when the ids are too sparse.
	Keys []keyset.SampleKeys `json:"keys,omitempty"`
}

// Run is one Open..Close of the sink. EndedAt stays nil when the run did not
// close cleanly (crash, kill -9); the next Open appends a new run.
type Run struct {
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at"`
	Version        string     `json:"version"`
	JobHash        string     `json:"job_hash,omitempty"`      // the job this run asked (Manifest.Jobs has its spec once it wrote)
	IdentityHash   string     `json:"identity_hash,omitempty"` // version 1 runs: their hash
	Limit          int64      `json:"limit"`
	Forced         bool       `json:"forced"`
	Notes          []string   `json:"notes,omitempty"` // what --force accepted, what recovery did
	RecordsWritten int64      `json:"records_written"`
	ErrorsWritten  int64      `json:"errors_written"`
	// Outcome is how the run ended, as its summary's first word says it
	// (done, incomplete, interrupted, failed), when the run closed the
	// sink; empty for runs of older versions, and for a run that never
	// closed (killed).
	Outcome string `json:"outcome,omitempty"`
}

// ReadManifest reads DIR/manifest.json and the part log it names, whose
// parts it appends to Parts (each name once): the manifest as a rewrite
// after the last finalized part would have written it. A missing manifest
// is an error that satisfies errors.Is(err, fs.ErrNotExist).
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.ManifestVersion > ManifestVersion {
		return nil, fmt.Errorf("%s: manifest version %d is newer than this synthgen reads (%d): use the synthgen that wrote it, or a newer one",
			path, m.ManifestVersion, ManifestVersion)
	}
	if err := readPartLog(dir, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func writeManifest(dir string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return disk.WriteFile(filepath.Join(dir, ManifestName), append(data, '\n'), 0o644)
}

// ErrDataWithoutManifest is returned by Open when DIR/data holds parts but
// DIR/manifest.json is missing, so nothing says what made them.
var ErrDataWithoutManifest = errors.New("shards without " + layout.ManifestName)
