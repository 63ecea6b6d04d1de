package export

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/sink"
)

// TestRunRefusesTheDatasetFromAnywhere: a job made in another directory
// names its dataset by a path relative to there (dataset.path h300.jsonl),
// which resolves to nothing from here. Its files are still known by the
// absolute path and the size and hash the manifest records, so an export
// over the dataset file, over a copy of it, or any overwrite while the
// dataset cannot be found, is refused, and the file is left as it was.
func TestRunRefusesTheDatasetFromAnywhere(t *testing.T) {
	t.Parallel()
	dir := fixtureDir(t, sink.FormatJSONL)
	work := t.TempDir()
	ds := filepath.Join(work, "h300.jsonl")
	const rows = `{"prompt":"q0"}` + "\n" + `{"prompt":"q1"}` + "\n"
	if err := os.WriteFile(ds, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	content, err := dataset.Stamp(dataset.Options{Selection: dataset.Selection{Path: ds, Format: "auto"}})
	if err != nil || len(content) != 1 {
		t.Fatalf("stamp: %v %v", content, err)
	}
	copied := filepath.Join(t.TempDir(), "copy.jsonl")
	if err := os.WriteFile(copied, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(other, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, out, moved, want string
	}{
		{"the dataset file", ds, "", "a file of the dataset"},
		{"a copy of the dataset file", copied, "", "the same size and hash as"},
		{"any file while the dataset cannot be found", other, ds + ".gone", "cannot be found"},
	} {
		o := options(t, FormatSpecForge, c.out, dir)
		o.Overwrite = true
		o.Job.Selection.Path = "h300.jsonl" // relative to where the run was made
		o.Job.Selection.Content = content
		if c.moved != "" {
			if err := os.Rename(ds, c.moved); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := os.ReadFile(c.out)
		_, err := Run(context.Background(), o)
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), c.want) || refused.Hint() == "" {
			t.Errorf("%s: %v, want a refusal saying %q with a hint", c.name, err, c.want)
		}
		if after, _ := os.ReadFile(c.out); string(after) != string(before) {
			t.Errorf("%s: the file was written over", c.name)
		}
	}
}

// TestRunRefusesAnotherShardsFile: a job split by file stamps only its own
// files; another shard's file is still found, under the directory its
// stamps show, by the relative glob the job was made with elsewhere.
func TestRunRefusesAnotherShardsFile(t *testing.T) {
	t.Parallel()
	dir := fixtureDir(t, sink.FormatJSONL)
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(work, "data", "a.jsonl"), filepath.Join(work, "data", "b.jsonl")
	for i, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(`{"prompt":"q`+string(rune('0'+i))+`"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	own, err := dataset.Stamp(dataset.Options{Selection: dataset.Selection{Path: a, Format: "auto"}})
	if err != nil {
		t.Fatal(err)
	}
	o := options(t, FormatSpecForge, b, dir)
	o.Overwrite = true
	o.Job.Selection = dataset.Selection{Path: "data/*.jsonl", Format: "auto", ShardBy: dataset.ShardFiles,
		Shard: dataset.Shard{Index: 0, Count: 2}, ShardContent: own}
	var refused *RefusedError
	if _, err := Run(context.Background(), o); !errors.As(err, &refused) || !strings.Contains(err.Error(), "a file of the dataset") {
		t.Errorf("another shard's file: %v, want refused as a file of the dataset", err)
	}
}
