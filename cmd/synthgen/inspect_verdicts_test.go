package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/internal/diskfault"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// TestInspectNeverOKOfAJobWithNoKeys: a job of zero answers (every row
// bad, or an empty dataset) is sound, with nothing pending, yet holds
// nothing: inspect does not call it ok, and export refuses it, both with a
// non-zero exit that says why.
func TestInspectNeverOKOfAJobWithNoKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, rows, want string }{
		{"every row bad", `{"foo":1}` + "\n" + `{"foo":2}` + "\n", "2 bad rows"},
		{"an empty dataset", "", "the dataset selects no rows"},
	} {
		ds := filepath.Join(t.TempDir(), "prompts.jsonl")
		if err := os.WriteFile(ds, []byte(c.rows), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := inspectFixture(t, sink.FormatJSONL, ds, nil, nil, "")
		out, err := runInspectCmd(t, dir)
		if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), "no keys") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: inspect exit %d: %v, want non-zero naming no keys and %q\n%s", c.name, exitCode(err), err, c.want, out)
		}
		if strings.Contains(out, "ok: ") {
			t.Errorf("%s: inspect says ok:\n%s", c.name, out)
		}
		for _, extra := range [][]string{nil, {"--partial"}} {
			r := cliRun(t, append([]string{"export", dir, "--format", "messages", "--out", filepath.Join(t.TempDir(), "train.jsonl")}, extra...)...)
			if r.err == nil || exitCode(r.err) == 0 || !strings.Contains(r.err.Error(), "no keys") {
				t.Errorf("%s: export %v: exit %d: %v, want refused\n%s", c.name, extra, exitCode(r.err), r.err, r.stderr)
			}
		}
	}
}

// editManifest rewrites dir's manifest.json through edit.
func editManifest(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, sink.ManifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// killRun makes dir's last run one that never ended, as a kill -9 leaves
// it: the manifest counts a run's records only when it ends.
func killRun(t *testing.T, dir string) {
	t.Helper()
	editManifest(t, dir, func(m map[string]any) {
		runs := m["runs"].([]any)
		last := runs[len(runs)-1].(map[string]any)
		last["ended_at"], last["records_written"], last["errors_written"] = nil, 0, 0
		delete(last, "outcome")
	})
}

// TestInspectCountsAKilledRunsRecords: a run killed before any resume
// has 0 records in the manifest while its parts hold them: inspect says
// how many they hold.
func TestInspectCountsAKilledRunsRecords(t *testing.T) {
	t.Parallel()
	ds := inspectDataset(t, 10)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 7, 1), []int{7}, "")
	killRun(t, dir)
	out, _ := runInspectCmd(t, dir)
	if !strings.Contains(out, "not ended (running now, or killed), 7 records and 1 error in its parts") {
		t.Errorf("the killed run is not said to hold its 7 records and 1 error:\n%s", out)
	}
}

// TestInspectRecomputesTheJobHash: a manifest whose job was edited by
// hand, its hash left as it was, is invalid: the records answer another
// job than the manifest now says.
func TestInspectRecomputesTheJobHash(t *testing.T) {
	t.Parallel()
	ds := inspectDataset(t, 4)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 4, 1), nil, "")
	if _, err := runInspectCmd(t, dir); err != nil {
		t.Fatalf("the fixture: %v", err)
	}
	editManifest(t, dir, func(m map[string]any) {
		m["job"].(map[string]any)["sampling"].(map[string]any)["model"] = "another-model"
	})
	out, err := runInspectCmd(t, dir)
	if err == nil || exitCode(err) != exitFailure || !strings.Contains(out, "does not hash to its job_hash") {
		t.Errorf("an edited job: exit %d: %v, want %d naming the hash\n%s", exitCode(err), err, exitFailure, out)
	}
}

// TestExportDiskFullDuringTheSort: a disk that fills while the audit's key
// index spills beside --out is a full disk (exit 1, saying so), not a DIR
// that is no output directory (exit 2). Not parallel: the fault is the
// process's.
func TestExportDiskFullDuringTheSort(t *testing.T) {
	ds := inspectDataset(t, 4)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 4, 1), nil, "")
	for _, spill := range []string{".synthgen-inspect-"} { // the audit's key index (the export's own spills only past 32 MB)
		parent := t.TempDir()
		restore := diskfault.Set(func(op, path string) error {
			if op == "write" && strings.HasPrefix(path, filepath.Join(parent, spill)) {
				return &fs.PathError{Op: op, Path: path, Err: syscall.ENOSPC}
			}
			return nil
		})
		r := cliRun(t, "export", dir, "--format", "messages", "--out", filepath.Join(parent, "train.jsonl"))
		restore()
		if exitCode(r.err) != exitFailure || !errors.Is(r.err, syscall.ENOSPC) || !strings.Contains(r.err.Error(), "free on the filesystem") ||
			strings.Contains(r.hint(), "output.dir") {
			t.Errorf("a full disk during the sort of %s: exit %d: %v (hint %q), want %d saying the disk is full", spill, exitCode(r.err), r.err, r.hint(), exitFailure)
		}
		if got := names(t, parent); len(got) != 0 {
			t.Errorf("a full disk during the sort of %s left %v", spill, got)
		}
	}
}

// TestSecondPassSaysTheFirstPassFailedKeys: a first pass with a key failed
// for good has no record, so no row, of it; a second pass over it is done
// with the rest. Its start and inspect say what it lacks, and how to get
// it.
func TestSecondPassSaysTheFirstPassFailedKeys(t *testing.T) {
	t.Parallel()
	ds := inspectDataset(t, 10)
	first := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 9, 1), []int{9}, "")
	m := startMock(t, mockserver.Options{MeanTokens: 5})
	second := filepath.Join(t.TempDir(), "judged")
	grade := []chat.Message{{Role: "user", Content: "Grade: {{.content}}"}}
	r := cliRun(t, passArgs(m.BaseURL, first, second, "jsonl", grade, t)...)
	r.ok(t, "second pass")
	const want = "has 1 key failed for good"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("the second pass's start does not say the first pass's failed key:\n%s", r.stderr)
	}
	out, _ := runInspectCmd(t, second)
	if !strings.Contains(out, want) {
		t.Errorf("inspect of the second pass does not say the first pass's failed key:\n%s", out)
	}
}
