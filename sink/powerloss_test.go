package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recordSteps runs fn and returns its disk steps as "op path".
func recordSteps(t *testing.T, fn func()) []string {
	t.Helper()
	var steps []string
	stepHook = func(op, path string) { steps = append(steps, op+" "+path) }
	defer func() { stepHook = nil }()
	fn()
	return steps
}

// TestRecoveryFsyncsBeforeFinalName: after kill -9 the page cache still
// holds what the killed process wrote but never fsynced, so a resume in the
// same boot reads it. Recovery must fsync a temporary file before it gives
// it a final name (and before the manifest lists it and the run skips its
// keys): otherwise a power loss afterwards leaves an incomplete file under
// a final name, with keys the resumed run skipped as done.
func TestRecoveryFsyncsBeforeFinalName(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the temporary renamed
	}{
		{
			name: "open jsonl shard ending in a complete line",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "data", "part-000000.jsonl.open")
				writeFile(t, path, jsonLines(t, 0, 5))
				return path
			},
		},
		{
			name: "open jsonl shard with a torn line",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "data", "part-000000.jsonl.open")
				writeFile(t, path, jsonLines(t, 0, 5)+`{"id":"5","sam`)
				return path
			},
		},
		{
			name: "open errors shard ending in a complete line",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "errors", "part-000000.jsonl.open")
				writeFile(t, path, `{"id":"a","sample":0,"cause":"timeout"}`+"\n")
				return path
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mustOpen(t, testOptions(dir, FormatJSONL)).Close()
			path := tt.setup(t, dir)
			var s *Sink
			steps := recordSteps(t, func() { s = mustOpen(t, testOptions(dir, FormatJSONL)) })
			defer s.Close()
			rename := slices.Index(steps, "rename "+path)
			if rename < 0 {
				t.Fatalf("%s was not finalized; steps:\n%s", path, strings.Join(steps, "\n"))
			}
			if !slices.Contains(steps[:rename], "fsync "+path) {
				t.Errorf("%s renamed to its final name without an fsync first; steps:\n%s", path, strings.Join(steps, "\n"))
			}
		})
	}
}

// TestOpenSyncsNewDirEntries: a new output directory (and any parent Open
// creates) must be in its parent's fsynced entries before the manifest and
// the parts inside it count as durable; else a power loss can drop the
// whole tree.
func TestOpenSyncsNewDirEntries(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "run")
	var s *Sink
	steps := recordSteps(t, func() { s = mustOpen(t, testOptions(dir, FormatJSONL)) })
	defer s.Close()
	manifest := slices.IndexFunc(steps, func(st string) bool { return strings.HasPrefix(st, "rename ") })
	if manifest < 0 {
		t.Fatalf("no manifest rename; steps:\n%s", strings.Join(steps, "\n"))
	}
	for _, parent := range []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir} {
		if !slices.Contains(steps[:manifest], "syncdir "+parent) {
			t.Errorf("%s not fsynced after a directory was created in it; steps:\n%s", parent, strings.Join(steps, "\n"))
		}
	}
}

// TestRecoverCutsZeroFilledTail: after a power loss some filesystems show
// the unsynced end of an appended file as NUL bytes, possibly followed by a
// later page that did reach the disk. encoding/json never writes a raw NUL,
// so a line holding one is the start of what the crash lost: recovery cuts
// there, keeps every line before it, and the job resumes, instead of
// refusing a directory that nothing but a power loss produced.
func TestRecoverCutsZeroFilledTail(t *testing.T) {
	zeros := strings.Repeat("\x00", 300)
	tests := []struct {
		name   string
		format string
		file   string
		tail   string
	}{
		{"zeros then a surviving page", FormatJSONL, "part-000000.jsonl.open", zeros + "ng\"}\n" + jsonLines(t, 7, 8)},
		{"zeros ending in a newline", FormatJSONL, "part-000000.jsonl.open", zeros + "\n"},
		{"half a line then zeros", FormatJSONL, "part-000000.jsonl.open", `{"id":"5","sample":1,"so` + zeros + "\n" + zeros},
		{"journal", FormatParquet, "part-000000.parquet.journal", zeros + "\n" + jsonLines(t, 7, 8)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mustOpen(t, testOptions(dir, tt.format)).Close()
			writeFile(t, filepath.Join(dir, "data", tt.file), jsonLines(t, 0, 5)+tt.tail)
			// The audit agrees with the recovery to come: valid, and the
			// records are the lines before the zeros.
			rep := mustInspect(t, dir)
			if !rep.OK || rep.Records != 5 || rep.Has(testRecord(7).Key()) {
				t.Errorf("audit: ok=%v records=%d has 7=%v problems=%v", rep.OK, rep.Records, rep.Has(testRecord(7).Key()), rep.Problems)
			}
			s, err := Open(testOptions(dir, tt.format))
			if err != nil {
				t.Fatalf("resume refused a zero-filled tail: %v", err)
			}
			if s.DoneCount() != 5 {
				t.Errorf("DoneCount = %d, want the 5 lines before the zeros", s.DoneCount())
			}
			writeRange(t, s, 5, 12)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			assertExactlyOnce(t, dir, keysOf(0, 12))
		})
	}
}

// TestRecoverRefusesGarbageWithoutZeros: the zero-fill rule is narrow: a
// complete line that is not JSON and holds no NUL is not what a crash
// makes, and is still refused, untouched.
func TestRecoverRefusesGarbageWithoutZeros(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, testOptions(dir, FormatJSONL)).Close()
	path := filepath.Join(dir, "data", "part-000000.jsonl.open")
	content := jsonLines(t, 0, 3) + "garbage\n" + jsonLines(t, 3, 4)
	writeFile(t, path, content)
	if _, err := Open(testOptions(dir, FormatJSONL)); err == nil || !strings.Contains(err.Error(), path+":4") {
		t.Fatalf("Open = %v, want a refusal naming %s:4", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != content {
		t.Error("refused recovery changed the file")
	}
}

// TestWriteErrorIsSticky injects the failures a full disk or a failing disk
// gives (a short write that leaves half a line, an fsync error) into the
// real write path: the file descriptor is closed under the sink, after the
// torn bytes are appended for a short write. The sink must refuse every
// later write (appending after a torn line would glue two records into one
// bad line), Close must not give the temporary a final name, and the next
// Open must recover every record whose Write returned nil, exactly once.
func TestWriteErrorIsSticky(t *testing.T) {
	tests := []struct {
		name   string
		format string
		op     string // step to fail
		file   string // temporary whose step fails
		torn   bool   // a short write: half a line reaches the file
	}{
		{"short write on a jsonl shard", FormatJSONL, "write", "data/part-000000.jsonl.open", true},
		{"fsync error on a jsonl shard", FormatJSONL, "fsync", "data/part-000000.jsonl.open", false},
		{"short write on a parquet journal", FormatParquet, "write", "data/part-000000.parquet.journal", true},
		{"short write on an errors shard", FormatJSONL, "write", "errors/part-000000.jsonl.open", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, tt.format)
			s := mustOpen(t, opts)
			target := filepath.Join(dir, tt.file)
			seen := 0
			stepHook = func(op, path string) {
				if op != tt.op || path != target {
					return
				}
				if seen++; seen != 3 {
					return
				}
				if tt.torn {
					appendBytes(t, path, `{"id":"torn","sample":0,"sou`)
				}
				f := s.cur
				if strings.HasPrefix(tt.file, "errors/") {
					f = s.errFile
				}
				_ = f.f.Close()
			}
			defer func() { stepHook = nil }()

			done := map[Key]bool{}
			var failed error
			for i := 0; i < 8 && failed == nil; i++ {
				if err := s.WriteError(&ErrorRecord{ID: fmt.Sprintf("e%d", i), Cause: "timeout"}); err != nil {
					failed = err
					break
				}
				r := testRecord(i)
				if err := s.Write(r); err != nil {
					failed = err
					break
				}
				done[r.Key()] = true
			}
			stepHook = nil
			if failed == nil {
				t.Fatal("the injected failure did not reach the caller")
			}
			if err := s.Write(testRecord(20)); err == nil {
				t.Error("Write after a failed write succeeded")
			}
			if err := s.WriteError(&ErrorRecord{ID: "e20"}); err == nil {
				t.Error("WriteError after a failed write succeeded")
			}
			if err := s.Flush(); err == nil {
				t.Error("Flush after a failed write succeeded")
			}
			if err := s.Close(); err == nil {
				t.Error("Close after a failed write succeeded")
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("Close gave the failed temporary its final name: %v", err)
			}

			s = mustOpen(t, opts)
			for k := range done {
				if !s.Done(k) {
					t.Errorf("key %v was written before the failure and is lost", k)
				}
			}
			for i := range 10 {
				if r := testRecord(i); !skip(s, r.Key()) {
					if err := s.Write(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			assertExactlyOnce(t, dir, keysOf(0, 10))
			if rep := mustInspect(t, dir); !rep.OK {
				t.Errorf("audit: %v", rep.Problems)
			}
		})
	}
}

// testNormalRunDiskOrder: a kill -9 leaves unsynced writes in the page
// cache, so the chaos tests pass even when an fsync is missing; only the
// order of the disk steps shows it. Over a normal run (data parts of both
// formats, an errors part, the manifest), every file given a final name
// by rename was fsynced after its last write, and a directory is fsynced
// between a rename into it and a removal there that depends on it (a
// Parquet part's journal goes only once the part's new name is durable,
// the part log only once the manifest that folded it is). Each append to
// the part log is fsynced at once, and manifest.json is rewritten only
// at Open and Close.
func testNormalRunDiskOrder(t *testing.T, format string) {
	dir := t.TempDir()
	opts := testOptions(dir, format)
	opts.SyncInterval = time.Hour // only the finalizing fsyncs count
	steps := recordSteps(t, func() {
		s := mustOpen(t, opts)
		writeRange(t, s, 0, 25)
		for i := 100; i < 112; i++ {
			if err := s.WriteError(&ErrorRecord{ID: strconv.Itoa(i), Cause: "timeout"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
	renamed := 0
	for i, st := range steps {
		op, path, _ := strings.Cut(st, " ")
		switch op {
		case "rename":
			renamed++
			last := -1
			for j := i - 1; j >= 0; j-- {
				o, p, _ := strings.Cut(steps[j], " ")
				if p == path && (o == "write" || o == "create" || o == "truncate") {
					last = j
					break
				}
			}
			if last >= 0 && !slices.Contains(steps[last:i], "fsync "+path) {
				t.Errorf("%s renamed without an fsync after its last write (step %d); steps:\n%s", path, i, strings.Join(steps, "\n"))
			}
		case "remove":
			d := filepath.Dir(path)
			for j := i - 1; j >= 0; j-- {
				o, p, _ := strings.Cut(steps[j], " ")
				if o == "syncdir" && p == d {
					break
				}
				if o == "rename" && filepath.Dir(p) == d {
					t.Errorf("%s removed after a rename in %s (step %d) with no fsync of the directory between; steps:\n%s", path, d, j, strings.Join(steps, "\n"))
					break
				}
			}
		}
	}
	if renamed < 5 {
		t.Errorf("only %d renames: the run did not finalize its shards", renamed)
	}
	// The part log: each append is fsynced before anything else
	// happens (the next part, the next record), and manifest.json
	// is rewritten at Open and Close only, not per part.
	log := filepath.Join(dir, partLogName(0))
	appends, rewrites := 0, 0
	for i, st := range steps {
		if st == "write "+log {
			appends++
			if i+1 == len(steps) || steps[i+1] != "fsync "+log {
				t.Errorf("shard log append (step %d) not followed by its fsync; steps:\n%s", i, strings.Join(steps, "\n"))
			}
		}
		if op, path, _ := strings.Cut(st, " "); op == "rename" && manifestTmp.MatchString(filepath.Base(path)) {
			rewrites++
		}
	}
	if appends != 3 || rewrites != 2 {
		t.Errorf("%d log appends and %d manifest rewrites for 3 shards, want 3 and 2 (Open, Close)", appends, rewrites)
	}
	// The log goes only after the rename of the manifest that
	// folded it (the directory fsync between is checked above).
	removed, lastRewrite := -1, -1
	for i, st := range steps {
		if op, path, _ := strings.Cut(st, " "); op == "rename" && manifestTmp.MatchString(filepath.Base(path)) {
			lastRewrite = i
		}
		if st == "remove "+log {
			removed = i
		}
	}
	if removed < lastRewrite {
		t.Errorf("shard log removed at step %d, before the compacted manifest's rename at step %d", removed, lastRewrite)
	}
}
