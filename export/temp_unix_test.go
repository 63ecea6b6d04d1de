//go:build unix

package export

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// TestStaleTempsRemoved: what exports of Out left when killed (a 0-byte
// temporary, a half-built HF directory, a spill file of another system)
// is removed by the next export of Out and said in its log; what is not
// provably an export's of Out stays: another --out's, a name that only
// looks alike, the .old an interrupted replacement keeps. While another
// export holds its shared lock on the directory (it runs), nothing is
// removed, and the export still runs beside it.
func TestStaleTempsRemoved(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	parent := t.TempDir()
	out := filepath.Join(parent, "train.jsonl")
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(parent, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := []string{".train.jsonl.synthgen-export-123.tmp", ".train.jsonl.synthgen-export-7.spill", ".train.jsonl.synthgen-export-456.tmp"}
	touch(stale[0])
	touch(stale[1])
	if err := os.MkdirAll(filepath.Join(parent, stale[2], "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	touch(filepath.Join(stale[2], "data", "train-00000-of-00002.parquet"))
	others := []string{
		".train.jsonl.synthgen-export-12a.tmp",           // not digits
		".train.jsonl.x.synthgen-export-1.tmp",           // train.jsonl.x's
		".other.jsonl.synthgen-export-5.tmp",             // other.jsonl's
		".train.jsonl.synthgen-export-5.old",             // an interrupted replacement's old dataset
		".train.jsonl.synthgen-export-.tmp",              // no digits
		"train.jsonl.synthgen-export-9.tmp",              // not hidden
		".train.jsonl.synthgen-export-9.tmp.keep",        // another suffix
		".train.jsonl.synthgen-export-9.tmp.parquet.tmp", // another suffix
	}
	for _, n := range others {
		touch(n)
	}
	var log bytes.Buffer
	o := options(t, FormatSpecForge, out, dir)
	o.Log = &log
	run(t, o)
	want := append(slices.Clone(others), "train.jsonl")
	slices.Sort(want)
	if got := names(t, parent); !slices.Equal(got, want) {
		t.Errorf("after the export: %v, want %v", got, want)
	}
	for _, n := range stale {
		if !strings.Contains(log.String(), "removed "+filepath.Join(parent, n)+", left by an export of "+out+" that was killed") {
			t.Errorf("the log does not say %s was removed:\n%s", n, log.String())
		}
	}

	// Another export runs in the directory: it holds the shared lock.
	d, err := os.Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	touch(stale[0])
	log.Reset()
	o.Out = filepath.Join(parent, "train2.jsonl")
	run(t, o) // another --out in the same directory
	o.Out = out
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	run(t, o)
	if got := names(t, parent); !slices.Contains(got, stale[0]) {
		t.Errorf("%s removed while another export held the directory: %v", stale[0], got)
	}
	if !strings.Contains(log.String(), filepath.Join(parent, stale[0])+", an export's temporary, stays") {
		t.Errorf("the log does not say why %s stays:\n%s", stale[0], log.String())
	}
	_ = d.Close()
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	run(t, o)
	if got := names(t, parent); slices.Contains(got, stale[0]) {
		t.Errorf("%s stays after the other export ended: %v", stale[0], got)
	}
}

// TestSpillHasNoName: the spill file of Parquet shards is unlinked as soon
// as it is created, so while the export reads it back nothing of it is
// beside the output: a kill -9 then leaves nothing either.
func TestSpillHasNoName(t *testing.T) {
	dir := fixtureDir(t, sink.FormatParquet)
	parent := t.TempDir()
	o := options(t, FormatSpecForge, filepath.Join(parent, "train.jsonl"), dir)
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	x, sum, err := buildIndex(t.Context(), o, parent, spillPattern(o.Out))
	if x != nil {
		defer x.close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if x.spill == nil || sum.Exported == 0 {
		t.Fatalf("no spill file for Parquet shards (%d rows)", sum.Exported)
	}
	if got := names(t, parent); len(got) != 0 {
		t.Errorf("beside the output while the spill file is open: %v", got)
	}
	it, err := x.sorter.Sorted()
	if err != nil {
		t.Fatal(err)
	}
	first, ok := it.Next()
	if !ok {
		t.Fatalf("no entry sorted: %v", it.Err())
	}
	var rec sink.Record
	if _, err := x.record(first, &rec, nil); err != nil || rec.ID == "" {
		t.Errorf("the first record read back from the unlinked spill file: %v %+v", err, rec)
	}
}
