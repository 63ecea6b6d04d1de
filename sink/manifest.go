package sink

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ManifestName is the manifest's file name inside the output directory.
const ManifestName = "manifest.json"

// Manifest is DIR/manifest.json: what made the directory and what it holds.
// It is rewritten atomically on Open, on every shard finalize and on Close.
// It is a summary for people and for the identity check; the shards on disk
// stay the truth about which keys are done.
type Manifest struct {
	Version   string           `json:"version"` // synthgen version that last wrote the manifest
	CreatedAt time.Time        `json:"created_at"`
	Identity  ManifestIdentity `json:"identity"`
	Limit     int64            `json:"limit"` // dataset.limit of the latest run (0 = all)
	Shards    []ShardInfo      `json:"shards"`
	Runs      []Run            `json:"runs"`
}

// ManifestIdentity is what the answers depend on. Hash covers Answer only:
// Config is stored for humans and changes (concurrency, output.dir, ...)
// that do not change answers must not block a resume.
type ManifestIdentity struct {
	Hash   string            `json:"hash"` // hex sha256 over the sorted Answer pairs
	Answer map[string]string `json:"answer"`
	Config map[string]any    `json:"config,omitempty"`
}

// ShardInfo describes one final data shard. FirstID and LastID are the ids of
// the smallest and largest key in the shard (decimal ids compare as numbers),
// not the first and last rows: answers arrive in completion order.
type ShardInfo struct {
	Name    string `json:"name"`   // file name under DIR/data
	Format  string `json:"format"` // "jsonl" | "parquet"
	Records int    `json:"records"`
	FirstID string `json:"first_id"`
	LastID  string `json:"last_id"`
}

// Run is one Open..Close of the sink. EndedAt stays nil when the run did not
// close cleanly (crash, kill -9); the next Open appends a new run.
type Run struct {
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at"`
	Version        string     `json:"version"`
	IdentityHash   string     `json:"identity_hash"`
	Limit          int64      `json:"limit"`
	Forced         bool       `json:"forced"`
	Notes          []string   `json:"notes,omitempty"` // what --force accepted, what recovery did
	RecordsWritten int64      `json:"records_written"`
	ErrorsWritten  int64      `json:"errors_written"`
}

// ReadManifest reads DIR/manifest.json. A missing manifest is an error that
// satisfies errors.Is(err, fs.ErrNotExist).
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
	return &m, nil
}

func writeManifest(dir string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, ManifestName), append(data, '\n'), 0o644)
}

// IdentityHash is the hex sha256 of the answer-changing settings, as stored
// in the manifest. Keys are sorted so that map order does not change it.
func IdentityHash(answer map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(answer)) {
		// Length prefixes keep "a=b" + "c" and "a" + "b=c" apart.
		fmt.Fprintf(h, "%d:%s=%d:%s\n", len(k), k, len(answer[k]), answer[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Diff is one answer-changing setting that differs between the manifest
// (Old) and this run (New). A key missing on one side shows as "(unset)".
type Diff struct {
	Key, Old, New string
}

const unset = "(unset)"

func diffAnswer(old, cur map[string]string) []Diff {
	keys := map[string]struct{}{}
	for k := range old {
		keys[k] = struct{}{}
	}
	for k := range cur {
		keys[k] = struct{}{}
	}
	var diffs []Diff
	for k := range keys {
		o, okOld := old[k]
		n, okNew := cur[k]
		if okOld && okNew && o == n {
			continue
		}
		if !okOld {
			o = unset
		}
		if !okNew {
			n = unset
		}
		diffs = append(diffs, Diff{Key: k, Old: o, New: n})
	}
	slices.SortFunc(diffs, func(a, b Diff) int { return strings.Compare(a.Key, b.Key) })
	return diffs
}

// MismatchError is returned by Open when the directory was made with
// settings that change the answers and Options.Force is not set: resuming
// would mix answers of two different jobs in one dataset.
type MismatchError struct {
	Dir   string
	Diffs []Diff
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "output dir %s holds answers made with other settings:", e.Dir)
	for _, d := range e.Diffs {
		fmt.Fprintf(&b, "\n  %s: %s (on disk) -> %s (now)", d.Key, d.Old, d.New)
	}
	b.WriteString("\nresume anyway with --force (the dataset will mix both settings), or choose a new output.dir")
	return b.String()
}

// ErrDataWithoutManifest is returned by Open when DIR/data holds shards but
// DIR/manifest.json is missing, so nothing says what made them.
var ErrDataWithoutManifest = errors.New("shards without manifest.json")
