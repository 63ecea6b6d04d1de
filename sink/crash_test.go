package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// manifestTmp matches the random temporary name of a manifest rewrite.
var manifestTmp = regexp.MustCompile(`\.manifest\.json\.\d+\.tmp`)

// errKilled is what stepHook panics with to stop the process at a step.
var errKilled = errors.New("killed")

// runKilledAt runs fn with the process "killed" just before its n-th disk
// step (1-based): stepHook panics there, the panic unwinds fn without its
// error paths running (a deferred cleanup that checks err sees nil), and
// runKilledAt reports the step it stopped at. It reports "" when fn ran to
// the end with fewer than n steps.
func runKilledAt(t *testing.T, n int, dir string, fn func()) (at string) {
	t.Helper()
	count := 0
	stepHook = func(op, path string) {
		count++
		if count == n {
			name, err := filepath.Rel(dir, path)
			if err != nil {
				name = path
			}
			name = manifestTmp.ReplaceAllString(name, ".manifest.json.*.tmp")
			at = fmt.Sprintf("%d: %s %s", n, op, name)
			panic(errKilled)
		}
	}
	defer func() {
		stepHook = nil
		if r := recover(); r != nil && r != errKilled {
			panic(r)
		}
	}()
	fn()
	return ""
}

// crashRun is one run of the crash tests: it resumes dir, writes records
// [from, to) with an error record for every third key of that range under
// another id, and closes. It records in durable what a run with an fsync
// per record promised: every key whose Write (or WriteError) returned nil.
type crashRun struct {
	t       *testing.T
	dir     string
	format  string
	from    int
	to      int
	done    map[Key]bool // keys of records written, Write returned nil
	failed  map[Key]bool // keys of error records written
	current *Sink        // the sink of the run, to drop as kill -9 would
}

func (c *crashRun) run() {
	c.current = nil
	s, err := Open(crashOptions(c.dir, c.format))
	if err != nil {
		c.t.Fatalf("open: %v", err)
	}
	c.current = s
	for i := c.from; i < c.to; i++ {
		r := testRecord(i)
		if skip(s, r.Key()) {
			continue
		}
		if err := s.Write(r); err != nil {
			c.t.Fatalf("write %d: %v", i, err)
		}
		c.done[r.Key()] = true
		if i%3 == 0 {
			e := &ErrorRecord{ID: fmt.Sprintf("e%d", i), Cause: "timeout"}
			if skip(s, e.Key()) {
				continue
			}
			if err := s.WriteError(e); err != nil {
				c.t.Fatalf("write error %d: %v", i, err)
			}
			c.failed[e.Key()] = true
		}
	}
	if err := s.Close(); err != nil {
		c.t.Fatalf("close: %v", err)
	}
}

// crashOptions makes parts of 3 records, so that a short run rotates data
// and errors parts in Write, not only in Close.
func crashOptions(dir, format string) Options {
	o := testOptions(dir, format)
	o.PartSize = 3
	return o
}

// kill drops the run's sink as the kernel would after kill -9.
func (c *crashRun) kill() {
	if c.current != nil && !c.current.closed {
		crash(c.current)
	}
	c.current = nil
}

// TestKillAtEveryStep kills a run before each of its disk steps in turn
// (create, write, fsync, rename, remove, truncate, directory fsync, in the
// write path, on rotation, in the part log append, in the manifest
// rewrites of Open and Close and the log removal after them), then kills
// the recovery of that state before each of its steps, then resumes for
// good. Whatever the step: Open accepts the directory, every record and
// error whose write returned is still there, and finishing the job leaves
// every key exactly once in final files that read in full.
func TestKillAtEveryStep(t *testing.T) {
	// Enough records to rotate in Write and in Close (and, for JSONL, to
	// rotate an errors part); Parquet has fewer because each conversion
	// is slow under -race, and its errors path is the JSONL one.
	for _, tc := range []struct {
		format string
		total  int
	}{{FormatJSONL, 10}, {FormatParquet, 7}} {
		format, total := tc.format, tc.total
		t.Run(format, func(t *testing.T) {
			// A first run leaves a manifest with parts, so that the killed
			// run recovers, reconciles and rotates. Made once, copied for
			// each kill.
			base := t.TempDir()
			first := &crashRun{t: t, dir: base, format: format, from: 0, to: 3, done: map[Key]bool{}, failed: map[Key]bool{}}
			first.run()
			stride := 1
			if testing.Short() {
				stride = 5
			}
			for n := 1; ; n += stride {
				dir := t.TempDir()
				copyDir(t, base, dir)
				c := &crashRun{t: t, dir: dir, format: format, from: 3, to: total, done: maps.Clone(first.done), failed: maps.Clone(first.failed)}
				at := runKilledAt(t, n, dir, c.run)
				c.kill()
				if at == "" {
					if n == 1 {
						t.Fatal("the run took no disk step")
					}
					break
				}
				// Kill the recovery of that state at each of its steps
				// too (recovery must be idempotent), through the manifest
				// rewrite of Open and the removal of the logs it folded, up
				// to Close's rewrite: the steps after are the ones above.
				rewrites := 0
				for m := 1; ; m++ {
					rec := &crashRun{t: t, dir: dir, format: format, from: 0, to: 0, done: c.done, failed: c.failed}
					atRec := runKilledAt(t, m, dir, rec.run)
					rec.kill()
					if strings.HasSuffix(atRec, "create "+ManifestName) {
						rewrites++
					}
					if atRec == "" || rewrites == 2 {
						break
					}
				}
				t.Run(strings.ReplaceAll(at, " ", "_"), func(t *testing.T) {
					checkResume(t, dir, format, total, c.done, c.failed)
				})
			}
		})
	}
}

// checkResume opens dir after the crashes, checks that every promised key
// is known, finishes the job and checks the result.
func checkResume(t *testing.T, dir, format string, total int, done, failed map[Key]bool) {
	t.Helper()
	s, err := Open(crashOptions(dir, format))
	if err != nil {
		t.Fatalf("resume refused a directory a crash left: %v", err)
	}
	for k := range done {
		if !s.Done(k) {
			t.Errorf("record %v was written and fsynced, and is lost", k)
		}
	}
	for k := range failed {
		if !s.Failed(k) {
			t.Errorf("error record %v was written and fsynced, and is lost", k)
		}
	}
	for i := range total {
		if r := testRecord(i); !skip(s, r.Key()) {
			if err := s.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, dir, keysOf(0, total))
	if rep := mustInspect(t, dir); !rep.OK {
		t.Errorf("audit after the resume: %v", rep.Problems)
	}
	for _, name := range dirNames(t, filepath.Join(dir, "data")) {
		if p, ok := ParsePart(name); !ok || p.Suffix != "" {
			t.Errorf("data/%s left after a clean close", name)
		}
	}
}

// copyDir copies the output directory src into the empty dst, keeping the
// files' modification times as a kill leaves them (cp -a), so that a resume
// takes the keys of an unchanged part from its summary in the manifest.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
			return err
		}
		return os.Chtimes(filepath.Join(dst, rel), st.ModTime(), st.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
}
