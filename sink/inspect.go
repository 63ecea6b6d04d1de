package sink

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
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

	// Problems make the directory invalid: a run would refuse it, or the
	// dataset holds something twice. Each says what to do.
	Problems []string `json:"problems"`
	// Notes are worth knowing but need no action.
	Notes []string `json:"notes,omitempty"`

	// The key index, kept for Has, Failed and Combine; not serialized.
	keys   map[Key]int32   // key -> index in files of the first file holding it
	extra  map[Key][]int32 // further files of a duplicated key
	files  []string        // paths of the data files that gave keys
	failed map[Key]string  // key with an error record -> cause of its last one
}

// ManifestSummary is the part of manifest.json a person checks.
type ManifestSummary struct {
	ManifestVersion int             `json:"manifest_version"` // 0: version 1
	Version         string          `json:"version"`
	CreatedAt       time.Time       `json:"created_at"`
	JobHash         string          `json:"job_hash"`
	Job             json.RawMessage `json:"job,omitempty"`
	Legacy          *LegacyIdentity `json:"identity,omitempty"` // version 1's job
	Config          map[string]any  `json:"config,omitempty"`
	Limit           int64           `json:"limit"`
	Shards          int             `json:"shards"`  // listed
	Records         int64           `json:"records"` // sum of the listed shards' records
	Runs            []Run           `json:"runs"`
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
	_, ok := r.keys[k]
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
		keys:          map[Key]int32{},
		extra:         map[Key][]int32{},
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

// readData reads every shard file of DIR/data in index order.
func (r *Report) readData(dataDir string, entries []fs.DirEntry) error {
	type named struct {
		name string
		part partFile
	}
	var parts []named
	finals := map[string]bool{}
	for _, e := range entries {
		p, ok := parsePart(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		parts = append(parts, named{e.Name(), p})
		if p.suffix == "" {
			finals[e.Name()] = true
		}
	}
	slices.SortFunc(parts, func(a, b named) int {
		return cmp.Or(cmp.Compare(a.part.index, b.part.index), strings.Compare(a.name, b.name))
	})
	for _, p := range parts {
		path := filepath.Join(dataDir, p.name)
		final := shardName(p.part.index, p.part.format)
		sh := ShardReport{Name: p.name, Format: p.part.format}
		switch p.part.suffix {
		case suffixTmp:
			sh.State, sh.Valid = ShardLeftover, true
			r.note("%s: a Parquet conversion cut short; its rows are in the journal or the final shard (the next run removes it)", p.name)
			r.Shards = append(r.Shards, sh)
			continue
		case suffixJournal:
			if finals[final] {
				// Renamed into place, journal not yet removed: the final
				// file holds every row, so reading both would count twice.
				sh.State, sh.Valid = ShardLeftover, true
				r.note("%s: journal of the complete %s (the next run removes it)", p.name, final)
				r.Shards = append(r.Shards, sh)
				continue
			}
		case suffixOpen:
			if finals[final] {
				sh.State = ShardInvalid
				sh.Problem = "both " + final + " and " + p.name + " exist"
				r.problem("both %s and %s exist, which the sink never leaves: keep the one with all records, move the other away", filepath.Join(dataDir, final), path)
				r.Shards = append(r.Shards, sh)
				continue
			}
		}
		temp := p.part.suffix != ""
		err := r.readShard(path, p.part.format, temp, temp, &sh)
		if errors.Is(err, errVanished) && !finals[final] {
			// Finalized between the listing and the read: .open renamed,
			// or journal converted then removed. Read what it became.
			sh = ShardReport{Name: final, Format: p.part.format}
			err = r.readShard(filepath.Join(dataDir, final), p.part.format, false, true, &sh)
		}
		if err != nil {
			return err
		}
		r.Shards = append(r.Shards, sh)
	}
	return nil
}

// shardAcc collects one shard's records before they count: an invalid
// shard's records are left out of the totals, since moving it away (what
// its problem says to do) makes the next run generate them again.
type shardAcc struct {
	keys    []Key
	prompt  int64
	compl   int64
	finish  map[string]int64
	records int
}

func (a *shardAcc) add(rec *Record) {
	a.keys = append(a.keys, rec.Key())
	a.prompt += int64(rec.PromptTokens)
	a.compl += int64(rec.CompletionTokens)
	if a.finish == nil {
		a.finish = map[string]int64{}
	}
	a.finish[rec.FinishReason]++
	a.records++
}

func checkRecord(rec *Record) error {
	if rec.ID == "" {
		return errors.New("id: missing or empty")
	}
	if rec.Sample < 0 {
		return fmt.Errorf("sample: %d is negative", rec.Sample)
	}
	return nil
}

// commit counts a valid shard's records and indexes its keys.
func (r *Report) commit(path string, a *shardAcc) {
	if len(a.keys) == 0 {
		return
	}
	fi := int32(len(r.files))
	r.files = append(r.files, path)
	for _, k := range a.keys {
		r.addKey(k, fi)
	}
	r.Records += int64(a.records)
	r.PromptTokens += a.prompt
	r.CompletionTokens += a.compl
	for f, n := range a.finish {
		r.FinishReasons[f] += n
	}
}

func (r *Report) addKey(k Key, fi int32) {
	if _, dup := r.keys[k]; dup {
		r.extra[k] = append(r.extra[k], fi)
		return
	}
	r.keys[k] = fi
}

// readShard reads one data file. With mayVanish, a file that is gone
// returns errVanished (a writer moved it on) instead of a problem.
func (r *Report) readShard(path, format string, temp, mayVanish bool, sh *ShardReport) error {
	if mayVanish {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return errVanished
		}
	}
	if format == FormatParquet && !temp {
		return r.readParquet(path, sh)
	}
	return r.readJSONL(path, temp, mayVanish, sh)
}

// readJSONL reads a JSONL shard (final, .open or .journal). A final file
// must end in a newline; a temporary may end in a torn line that a writer is
// still appending, which is not read.
func (r *Report) readJSONL(path string, temp, mayVanish bool, sh *ShardReport) error {
	f, err := os.Open(path)
	if err != nil {
		if mayVanish && errors.Is(err, fs.ErrNotExist) {
			return errVanished
		}
		sh.State, sh.Problem = ShardInvalid, err.Error()
		r.problem("%s: %v", path, err)
		return nil
	}
	defer f.Close()
	acc := &shardAcc{}
	var bad []string
	badLines := 0
	complete, err := forEachLine(f, func(line []byte, n int) error {
		if temp && bytes.IndexByte(line, 0) >= 0 {
			// Where a power loss zero-filled the unsynced end: recovery
			// cuts from here (see recoverTail), so nothing from here on
			// is a record.
			return errZeroFill
		}
		var rec Record
		err := json.Unmarshal(line, &rec)
		if err == nil {
			err = checkRecord(&rec)
		}
		if err != nil {
			badLines++
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%s:%d: %v", filepath.Base(path), n, err))
			}
			return nil
		}
		acc.add(&rec)
		return nil
	})
	if errors.Is(err, errZeroFill) {
		r.note("%s: ends in NUL bytes a power loss left; the next run cuts them", path)
	} else if err != nil {
		sh.State, sh.Problem = ShardInvalid, err.Error()
		r.problem("%s: read: %v", path, err)
		return nil
	}
	sh.Records = acc.records
	if !temp && badLines == 0 {
		if st, err := f.Stat(); err == nil && st.Size() != complete {
			bad = append(bad, fmt.Sprintf("%s:%d: last line is incomplete (%d bytes without a newline)",
				filepath.Base(path), acc.records+1, st.Size()-complete))
			badLines++
		}
	}
	if badLines > 0 {
		sh.State = ShardInvalid
		sh.Problem = strings.Join(bad, "; ")
		if badLines > len(bad) {
			sh.Problem += fmt.Sprintf(" (%d bad lines in all)", badLines)
		}
		if temp {
			r.problem("%s is corrupt: %s; the next run refuses it: move it away and rerun to regenerate its records", path, sh.Problem)
		} else {
			r.problem("%s is corrupt: %s; move it away (out of data/) and rerun with --force to regenerate its records", path, sh.Problem)
		}
		return nil
	}
	sh.Valid = true
	sh.State = ShardOK
	if temp {
		sh.State = ShardOpen
	}
	r.commit(path, acc)
	return nil
}

// inspectBatch is how many Parquet rows are decoded per read.
const inspectBatch = 64

// readParquet reads a final Parquet shard through parquet-go's generic
// reader: the footer, the schema (every column of Record, in the standard
// LIST layout) and every row.
func (r *Report) readParquet(path string, sh *ShardReport) error {
	acc, err := readParquetRecords(path)
	if err != nil {
		sh.State, sh.Problem = ShardInvalid, err.Error()
		if acc != nil {
			sh.Records = acc.records
		}
		r.problem("%s is corrupt: %v; move it away (out of data/) and rerun with --force to regenerate its records", path, err)
		return nil
	}
	sh.Records, sh.Valid, sh.State = acc.records, true, ShardOK
	r.commit(path, acc)
	return nil
}

var recordSchema = parquet.SchemaOf(Record{})

func readParquetRecords(path string) (acc *shardAcc, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// parquet-go panics on some malformed pages; a corrupt file must be a
	// reported problem, not a crash of the tool that looks for them.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("unreadable: %v", p)
		}
	}()
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("not a readable parquet file: %w", err)
	}
	if err := refuseLZ4(pf); err != nil {
		return nil, err
	}
	for _, col := range recordSchema.Columns() {
		if _, ok := pf.Schema().Lookup(col...); !ok {
			return nil, fmt.Errorf("schema: no column %s", strings.Join(col, "."))
		}
	}
	acc = &shardAcc{}
	rows := make([]Record, inspectBatch)
	for g, rg := range pf.RowGroups() {
		rd := parquet.NewGenericRowGroupReader[Record](rg)
		var got int64
		for {
			clear(rows)
			n, err := rd.Read(rows)
			for i := range rows[:n] {
				if err := checkRecord(&rows[i]); err != nil {
					_ = rd.Close()
					return acc, fmt.Errorf("row %d: %w", int64(acc.records)+int64(i), err)
				}
			}
			for i := range rows[:n] {
				acc.add(&rows[i])
			}
			got += int64(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = rd.Close()
				return acc, fmt.Errorf("row group %d: %w", g, err)
			}
			if n == 0 {
				_ = rd.Close()
				return acc, fmt.Errorf("row group %d: reader made no progress", g)
			}
		}
		_ = rd.Close()
		if got != rg.NumRows() {
			return acc, fmt.Errorf("row group %d: %d rows read, footer says %d", g, got, rg.NumRows())
		}
	}
	return acc, nil
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

// readErrors reads DIR/errors (final and .open files).
func (r *Report) readErrors(errDir string) error {
	entries, err := os.ReadDir(errDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", errDir, err)
	}
	var names []string
	for _, e := range entries {
		p, ok := parsePart(e.Name())
		if ok && e.Type().IsRegular() && p.format == FormatJSONL && (p.suffix == "" || p.suffix == suffixOpen) {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, _ := parsePart(a)
		pb, _ := parsePart(b)
		return cmp.Or(cmp.Compare(pa.index, pb.index), strings.Compare(a, b))
	})
	for _, name := range names {
		path := filepath.Join(errDir, name)
		temp := strings.HasSuffix(name, suffixOpen)
		f, err := os.Open(path)
		if temp && errors.Is(err, fs.ErrNotExist) && !slices.Contains(names, strings.TrimSuffix(name, suffixOpen)) {
			// Renamed to its final name since the listing.
			path = strings.TrimSuffix(path, suffixOpen)
			f, err = os.Open(path)
		}
		if err != nil {
			if temp && errors.Is(err, fs.ErrNotExist) {
				return errVanished
			}
			r.problem("%s: %v", path, err)
			continue
		}
		var bad string
		_, err = forEachLine(f, func(line []byte, n int) error {
			var e ErrorRecord
			err := json.Unmarshal(line, &e)
			if err == nil && e.ID == "" {
				err = errors.New("id: missing or empty")
			}
			if err != nil {
				if bad == "" {
					bad = fmt.Sprintf("%s:%d: %v", path, n, err)
				}
				return nil
			}
			r.Errors.Records++
			r.failed[e.Key()] = e.Cause
			return nil
		})
		_ = f.Close()
		if err != nil {
			r.problem("%s: read: %v", path, err)
		}
		if bad != "" {
			r.problem("%s is corrupt: the next run refuses it; move it away (its keys are requested again)", bad)
		}
	}
	return nil
}

// finish derives the totals and the problems that need every shard read.
func (r *Report) finish() {
	r.Distinct = int64(len(r.keys))
	r.Errors.Keys = len(r.failed)
	r.Errors.Open = 0
	r.Errors.ByCause = map[string]int{}
	for k, cause := range r.failed {
		if !r.Has(k) {
			r.Errors.Open++
			if cause == "" {
				cause = "unknown"
			}
			r.Errors.ByCause[cause]++
		}
	}
	if r.Records > 0 {
		r.TruncatedShare = float64(r.FinishReasons["length"]) / float64(r.Records)
	}
	r.Duplicates = r.duplicates()
	r.Problems = append(r.Problems, groupDuplicates(r.Duplicates)...)
}

// duplicates lists every key held by more than one file, in key order.
func (r *Report) duplicates() []Duplicate {
	out := []Duplicate{}
	for k, more := range r.extra {
		d := Duplicate{ID: k.ID, Sample: k.Sample, Files: []string{r.files[r.keys[k]]}}
		for _, fi := range more {
			d.Files = append(d.Files, r.files[fi])
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Duplicate) int {
		return compareKeys(Key{a.ID, a.Sample}, Key{b.ID, b.Sample})
	})
	return out
}

// groupDuplicates makes one problem per set of files sharing keys: a shard
// copied whole is one line, not a thousand.
func groupDuplicates(dups []Duplicate) []string {
	type group struct {
		files []string
		first Duplicate
		n     int
	}
	groups := map[string]*group{}
	var order []string
	for _, d := range dups {
		files := slices.Clone(d.Files)
		slices.Sort(files)
		id := strings.Join(files, "\x00")
		g := groups[id]
		if g == nil {
			g = &group{files: files, first: d}
			groups[id] = g
			order = append(order, id)
		}
		g.n++
	}
	var out []string
	for _, id := range order {
		g := groups[id]
		where := "in " + strings.Join(g.files, " and ")
		if len(g.files) == 2 && g.files[0] == g.files[1] {
			where = "twice in " + g.files[0]
		}
		if g.n == 1 {
			out = append(out, fmt.Sprintf("duplicate key id=%q sample=%d %s: keep one copy, delete the other (a JSONL line, or the row from a Parquet shard)",
				g.first.ID, g.first.Sample, where))
			continue
		}
		out = append(out, fmt.Sprintf("%d duplicate keys %s (first id=%q sample=%d): keep one copy of each; when a whole shard was copied, move the copy away",
			g.n, where, g.first.ID, g.first.Sample))
	}
	return out
}

// ErrIdentityDiffers is returned by Combine when the directories were made
// with different answer settings: they are not one dataset.
var ErrIdentityDiffers = errors.New("directories were made with different settings")

// Combine reads several reports (one per --shard i/n directory) as one
// dataset: counts and tokens add up, and a key in two directories is a
// duplicate like a key in two shards. Per-directory problems stay in their
// reports; the combined report's Problems are the keys duplicated across
// directories, its Manifest the first directory's (they share the identity)
// and its Shards empty. Directories whose manifests have different identity hashes
// are refused with ErrIdentityDiffers.
func Combine(reports ...*Report) (*Report, error) {
	c := newReport("")
	hash := ""
	for _, r := range reports {
		c.Dirs = append(c.Dirs, r.Dir)
		if r.Manifest != nil {
			if hash != "" && r.Manifest.JobHash != hash {
				return nil, fmt.Errorf("combine %s: %w (identity %.12s vs %.12s): inspect them one by one",
					strings.Join(c.Dirs, ", "), ErrIdentityDiffers, hash, r.Manifest.JobHash)
			}
			hash = r.Manifest.JobHash
			if c.Manifest == nil {
				c.Manifest = r.Manifest
			}
		}
		off := int32(len(c.files))
		c.files = append(c.files, r.files...)
		for k, fi := range r.keys {
			c.addKey(k, fi+off)
			for _, more := range r.extra[k] {
				c.addKey(k, more+off)
			}
		}
		for k, cause := range r.failed {
			c.failed[k] = cause
		}
		c.Records += r.Records
		c.PromptTokens += r.PromptTokens
		c.CompletionTokens += r.CompletionTokens
		for f, n := range r.FinishReasons {
			c.FinishReasons[f] += n
		}
		c.Errors.Records += r.Errors.Records
	}
	c.finish()
	// Duplicates inside one directory are that directory's problems
	// already; here only the ones spanning directories are new.
	c.Problems = c.Problems[:0]
	var across []Duplicate
	for _, d := range c.Duplicates {
		dirs := map[string]bool{}
		for _, f := range d.Files {
			dirs[dirOfData(f)] = true
		}
		if len(dirs) > 1 {
			across = append(across, d)
		}
	}
	c.Problems = append(c.Problems, groupDuplicates(across)...)
	return c, nil
}

// dirOfData is the output directory of a data file path (DIR/data/NAME).
func dirOfData(path string) string { return filepath.Dir(filepath.Dir(path)) }

// SortedFinishReasons returns the finish reasons by count, largest first.
func (r *Report) SortedFinishReasons() []string {
	return slices.SortedFunc(maps.Keys(r.FinishReasons), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.FinishReasons[b], r.FinishReasons[a]), strings.Compare(a, b))
	})
}
