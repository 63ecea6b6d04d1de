package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestShardsPartitionTheJob: for n in {1, 3, 7}, the n `--shard i/n`
// directories of one job hold every key of the dataset exactly once between
// them (their union is the key set, and no key is in two), and one export of
// the n directories is byte for byte the export of a single-process run of
// the same job. That is what a Kubernetes Indexed Job or a Slurm array
// (examples/) relies on.
func TestShardsPartitionTheJob(t *testing.T) {
	t.Parallel()
	const prompts = 61 // prime: no n divides it, so the shards are uneven
	export := func(t *testing.T, dirs []string) []byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "train.jsonl")
		args := append(append([]string{"export"}, dirs...), "--format", "specforge", "--out", out, "--keep-truncated")
		cliRun(t, args...).ok(t, "export")
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	single := export(t, exportJob(t, prompts, 0))
	if n := bytes.Count(single, []byte("\n")); n == 0 {
		t.Fatal("the single-process export is empty")
	}
	for _, n := range []int{1, 3, 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			dirs := exportJob(t, prompts, n)
			owner := map[string]int{}
			for i, dir := range dirs {
				got := cliRecords(t, dir)
				if len(got) == 0 {
					t.Errorf("shard %d/%d wrote nothing", i, n)
				}
				for id, c := range got {
					if c != 1 {
						t.Errorf("shard %d/%d: id %s written %d times", i, n, id, c)
					}
					if j, dup := owner[id]; dup {
						t.Errorf("id %s is in shard %d/%d and in shard %d/%d", id, j, n, i, n)
					}
					owner[id] = i
				}
			}
			for i := range prompts {
				if _, ok := owner[strconv.Itoa(i)]; !ok {
					t.Errorf("id %d is in no shard of %d", i, n)
				}
			}
			if len(owner) != prompts {
				t.Errorf("%d ids across %d shards, want %d", len(owner), n, prompts)
			}
			if got := export(t, dirs); !bytes.Equal(got, single) {
				t.Errorf("export of %d shard directories differs from the single run's (%d vs %d bytes)", n, len(got), len(single))
			}
		})
	}
}
