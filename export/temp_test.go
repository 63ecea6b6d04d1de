package export

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// errAfter is a context whose Err turns to context.Canceled at its n-th
// call (counting from 0), or never when n < 0; calls counts them. Every
// place the export looks at its context is one call, so a run with each n
// below a whole run's count stops the export at each of them in turn.
type errAfter struct {
	context.Context
	n     int64
	calls atomic.Int64
}

func (c *errAfter) Err() error {
	if i := c.calls.Add(1) - 1; c.n >= 0 && i >= c.n {
		return context.Canceled
	}
	return nil
}

func (c *errAfter) Done() <-chan struct{} { return nil }

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestCancelAtEveryPoint: an export cancelled at any place it looks at its
// context (between files of the index, between records, after the last
// record before the output takes its name) leaves what was under Out as it
// was and no temporary beside it, for a JSONL and a Parquet file, a new
// HF directory and one replacing an earlier export's (--overwrite), from
// JSONL and from Parquet shards (which spill).
func TestCancelAtEveryPoint(t *testing.T) {
	for _, shards := range []string{sink.FormatJSONL, sink.FormatParquet} {
		dir := fixtureDir(t, shards)
		for _, out := range []string{"train.jsonl", "train.parquet", "ds", "ds-over"} {
			t.Run(shards+"/"+out, func(t *testing.T) {
				parent := t.TempDir()
				o := options(t, FormatSpecForge, filepath.Join(parent, out), dir)
				o.HF = strings.HasPrefix(out, "ds")
				switch {
				case out == "ds-over":
					o.Overwrite = true
					run(t, o) // the earlier export it replaces
				case !o.HF:
					if err := os.WriteFile(o.Out, []byte("old\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				before := snapshot(t, parent)
				whole := &errAfter{Context: context.Background(), n: -1}
				probe := o
				probe.Out = filepath.Join(t.TempDir(), out)
				if _, err := Run(whole, probe); err != nil {
					t.Fatal(err)
				}
				// Once before each file of the index, once every 1024
				// records, once after the last record, before the output
				// takes its name.
				points := whole.calls.Load()
				if want := int64(len(o.Report.Files())) + 1 + 1; points != want {
					t.Fatalf("the export looked at its context %d times, want %d: before each of the %d files of the index, before the first record, before the commit", points, want, len(o.Report.Files()))
				}
				for n := range points {
					if _, err := Run(&errAfter{Context: context.Background(), n: n}, o); err == nil {
						t.Fatalf("cancelled at point %d of %d: the export succeeded", n, points)
					}
					if got := snapshot(t, parent); !maps2Equal(got, before) {
						t.Fatalf("cancelled at point %d of %d: %s holds %v, want %v as before", n, points, parent, keys(got), keys(before))
					}
				}
			})
		}
	}
}

// snapshot is every file under dir with its bytes.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = nil
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maps2Equal(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestHFReplace: an HF export over a directory is refused, naming it and
// what to do, unless it is a dataset an export wrote and Overwrite is set;
// then the new dataset takes its place and nothing else is left beside it.
func TestHFReplace(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	parent := t.TempDir()
	out := filepath.Join(parent, "ds")
	o := options(t, FormatSpecForge, out, dir)
	o.HF = true
	run(t, o)
	var refused *RefusedError
	if _, err := Run(context.Background(), o); !errors.As(err, &refused) || !strings.Contains(err.Error(), out+" exists (a dataset an earlier export wrote)") ||
		refused.Hint() != "pass --overwrite to replace it, or give another path" {
		t.Errorf("an earlier export's dataset without Overwrite: %v", err)
	}
	o.Overwrite, o.Format = true, FormatMessages
	run(t, o)
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || !strings.Contains(string(card), "--format messages") {
		t.Errorf("the dataset was not replaced by the messages export: %v\n%s", err, card)
	}
	if got := names(t, parent); !slices.Equal(got, []string{"ds"}) {
		t.Errorf("beside the dataset: %v", got)
	}
	if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "is no dataset an export wrote (it holds notes.txt)") {
		t.Errorf("a dataset holding the user's file, with Overwrite: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "notes.txt")); string(b) != "mine" {
		t.Error("the user's file is gone")
	}
}

// TestHFReplaceWithoutExchange: where no system call swaps two names, the
// replacement renames the old dataset aside, the new one in, and removes
// the old one: nothing but the new dataset is left.
func TestHFReplaceWithoutExchange(t *testing.T) {
	swapNames = func(string, string) error { return errors.ErrUnsupported }
	defer func() { swapNames = exchange }()
	dir := fixtureDir(t, sink.FormatJSONL)
	parent := t.TempDir()
	o := options(t, FormatSpecForge, filepath.Join(parent, "ds"), dir)
	o.HF = true
	run(t, o)
	o.Overwrite, o.Format = true, FormatMessages
	run(t, o)
	card, err := os.ReadFile(filepath.Join(o.Out, "README.md"))
	if err != nil || !strings.Contains(string(card), "--format messages") {
		t.Errorf("the dataset was not replaced by the messages export: %v", err)
	}
	if got := names(t, parent); !slices.Equal(got, []string{"ds"}) {
		t.Errorf("beside the dataset: %v", got)
	}
}
