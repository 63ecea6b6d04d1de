package audit

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// TestDirs: one directory is its own dataset; several are combined, and a
// key in two of them makes the set invalid though each is fine.
func TestDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 20)
	writeInspectDir(t, b, sink.FormatParquet, 20, 35)

	one, err := Dirs(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Dirs) != 1 || one.Combined != nil || one.NotCombined != nil || one.Dataset() != one.Dirs[0] || !one.OK() {
		t.Errorf("one dir: %+v", one)
	}

	two, err := Dirs(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(two.Dirs) != 2 || two.Combined == nil || two.Dataset() != two.Combined || !two.OK() ||
		two.Combined.Records != 35 || two.Dirs[1].Dir != b {
		t.Fatalf("two dirs: %+v, not combined: %v", two, two.NotCombined)
	}

	line := readLines(t, filepath.Join(a, "data", "part-000000.jsonl"))[4]
	putFile(t, filepath.Join(b, "data", "part-000007.jsonl"), line+"\n")
	dup, err := Dirs(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if dup.OK() || !dup.Dirs[0].OK() || !dup.Dirs[1].OK() || len(dup.Combined.Duplicates) != 1 {
		t.Errorf("a key in both dirs: ok %v, combined problems %q", dup.OK(), dup.Combined.Problems)
	}
}

// TestDirsNotOneDataset: directories of different jobs are audited each
// on its own, not combined, and not invalid for that.
func TestDirsNotOneDataset(t *testing.T) {
	a, other := t.TempDir(), t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 5)
	opts := testOptions(other, sink.FormatJSONL)
	opts.Job.Hash = "other"
	s := mustOpen(t, opts)
	writeRange(t, s, 0, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	set, err := Dirs(a, other)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(set.NotCombined, ErrIdentityDiffers) || set.Combined != nil || set.Dataset() != nil || !set.OK() || len(set.Dirs) != 2 {
		t.Errorf("different jobs: not combined %v, combined %v, ok %v", set.NotCombined, set.Combined, set.OK())
	}
}

// TestDirsNotOutputDir: a directory that is not an output directory is
// an error, whichever of the set it is.
func TestDirsNotOutputDir(t *testing.T) {
	a := t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 5)
	if _, err := Dirs(a, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a synthgen output directory") {
		t.Errorf("err = %v", err)
	}
}
