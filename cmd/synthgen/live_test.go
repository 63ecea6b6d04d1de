//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// holdLock holds dir's lock as a live run does, writing itself as the
// holder, until the test ends.
func holdLock(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, sink.LockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, `{"pid":%d,"hostname":"gpu-01"}`+"\n", 4242); err != nil {
		t.Fatal(err)
	}
}

// TestLiveDirectoryIsSaid: inspect and export of a directory a run is
// writing say so, naming the run; export's refusal of the incomplete job
// says to wait for it; neither writes to the directory.
func TestLiveDirectoryIsSaid(t *testing.T) {
	ds := inspectDataset(t, 10)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 7, 1), nil, "")
	holdLock(t, dir)
	before := fileHashes(t, dir)

	r := cliRun(t, "inspect", dir)
	if !strings.Contains(r.stdout, "being written now by synthgen pid 4242 on gpu-01") {
		t.Errorf("inspect of a live directory does not say so:\n%s", r.stdout)
	}
	// The job is not done because a run is doing it: the hint says so,
	// not to run it again.
	if exitCode(r.err) != exitPending || strings.Contains(r.hint(), "run the job again") ||
		!strings.Contains(r.hint(), "synthgen pid 4242 on gpu-01 is writing "+dir+" now") ||
		!strings.Contains(r.stdout, "(being written now by synthgen pid 4242 on gpu-01)") {
		t.Errorf("inspect of a live, incomplete job: exit %d, hint %q, want %d and the run named as running\n%s", exitCode(r.err), r.hint(), exitPending, r.stdout)
	}
	r = cliRun(t, "inspect", "--json", dir)
	if !strings.Contains(r.stdout, `"written_by": "synthgen pid 4242 on gpu-01"`) {
		t.Errorf("inspect --json of a live directory has no written_by:\n%s", r.stdout)
	}
	out := filepath.Join(t.TempDir(), "train.jsonl")
	r = cliRun(t, "export", dir, "--format", "messages", "--out", out)
	if exitCode(r.err) != exitPending || !strings.Contains(r.stderr, "is being written now by synthgen pid 4242 on gpu-01") ||
		!strings.Contains(r.hint(), "a run is writing") {
		t.Errorf("export of a live, incomplete job: exit %d, stderr %q, hint %q; want %d, the run named, and to wait", exitCode(r.err), r.stderr, r.hint(), exitPending)
	}
	if after := fileHashes(t, dir); len(after) != len(before) {
		t.Errorf("inspect or export changed the live directory: %d files before, %d after", len(before), len(after))
	} else {
		for name, h := range before {
			if after[name] != h {
				t.Errorf("%s changed", name)
			}
		}
	}
}
