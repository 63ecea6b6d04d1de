package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/sink"
)

// These tests are about what a job is: a resume must be the same job (the
// same rows, the same part of the dataset), whatever the path it is given
// by, and a directory written by an earlier synthgen must keep resuming.

// TestRunRefusesAnotherShard: a directory made with --shard 0/2 holds shard
// 0's keys; resuming it with --shard 1/2 would mix two selections in one
// directory. It is refused, naming both values, and nothing is asked.
func TestRunRefusesAnotherShard(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 12, 0), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args("--shard", "0/2")...).ok(t, "shard 0/2")
	before := m.Stats().Requests

	r := cliRun(t, cj.args("--shard", "1/2")...)
	if exitCode(r.err) != exitUsage {
		t.Fatalf("resume with --shard 1/2: exit %d (%v), want %d", exitCode(r.err), r.err, exitUsage)
	}
	if msg := r.err.Error(); !strings.Contains(msg, "shard: 0/2 (on disk) -> 1/2 (now)") {
		t.Errorf("the refusal does not name both shards:\n%s", msg)
	}
	if got := m.Stats().Requests - before; got != 0 {
		t.Errorf("%d requests sent by a refused run", got)
	}
	wantIDs(t, "after the refusal", cliRecords(t, cj.dir), "0", "2", "4", "6", "8", "10")

	// The whole dataset is another selection too.
	r = cliRun(t, cj.args()...)
	if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "shard: 0/2 (on disk) -> all (now)") {
		t.Errorf("resume without --shard: exit %d, %v; want a refusal naming 0/2 -> all", exitCode(r.err), r.err)
	}
	// The same shard resumes.
	cliRun(t, cj.args("--shard", "0/2")...).ok(t, "shard 0/2 again")
}

// TestRunRefusesEditedDataset: ids are row indices, so a dataset file
// edited in place (rows reordered) makes every id name another row. A
// resume is refused with what changed and what to do; nothing is asked and
// the directory is left as it was.
func TestRunRefusesEditedDataset(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 10, 0), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args("--dataset.limit", "6")...).ok(t, "first run")
	manifest := readFileT(t, filepath.Join(cj.dir, "manifest.json"))

	rows := strings.SplitAfter(string(readFileT(t, cj.data)), "\n")
	rows[0], rows[1] = rows[1], rows[0]
	if err := os.WriteFile(cj.data, []byte(strings.Join(rows, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	before := m.Stats().Requests
	r := cliRun(t, cj.args()...)
	if exitCode(r.err) != exitUsage {
		t.Fatalf("resume after the edit: exit %d (%v), want %d", exitCode(r.err), r.err, exitUsage)
	}
	for _, want := range []string{"dataset.content", "prompts.jsonl", "(on disk) ->", "Restore the files, or choose a new output.dir"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, r.err)
		}
	}
	if got := m.Stats().Requests - before; got != 0 {
		t.Errorf("%d requests sent by a refused run", got)
	}
	if got := readFileT(t, filepath.Join(cj.dir, "manifest.json")); string(got) != string(manifest) {
		t.Error("a refused run changed the manifest")
	}
	wantIDs(t, "after the refusal", cliRecords(t, cj.dir), idRange(0, 6)...)

	// inspect, which counts the directory against the dataset, says the
	// ids no longer name the rows the records answer.
	out, err := runInspectCmd(t, cj.dir)
	if exitCode(err) != exitFailure || !strings.Contains(out, "not the ones this directory was made from") {
		t.Errorf("inspect after the edit: exit %d (%v), want 1 and the change named:\n%s", exitCode(err), err, out)
	}

	// --force takes the edited file as the dataset from now on, and says so
	// in the run's notes.
	cliRun(t, cj.args("--force")...).ok(t, "forced")
	cliRun(t, cj.args()...).ok(t, "after the force")
}

// TestRunSameDatasetTwoPaths: one file named by a relative path, then by
// an absolute one, is one dataset: the second run resumes and asks nothing.
func TestRunSameDatasetTwoPaths(t *testing.T) {
	m, url := cliMock(t, nil)
	data := cliDataset(t, 8, 0)
	t.Chdir(filepath.Dir(data))
	cj := cliJob{baseURL: url, data: filepath.Base(data), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args()...).ok(t, "relative path")
	before := m.Stats().Requests

	cj.data = data
	r := cliRun(t, cj.args("--quiet=false")...) // "nothing to do" is no summary line
	r.ok(t, "absolute path")
	if got := m.Stats().Requests - before; got != 0 {
		t.Errorf("the same file by its absolute path asked %d requests, want none", got)
	}
	if !strings.Contains(r.stderr, "nothing to do") {
		t.Errorf("stderr does not say there is nothing to do:\n%s", r.stderr)
	}
}

// TestRunResumesDirectoryOfEarlierVersion: testdata/v1dir holds output
// directories written by synthgen before the typed job (manifest version
// 1). They resume (growing the limit asks only the new rows), their
// manifest is upgraded, and inspect reads them before and after.
func TestRunResumesDirectoryOfEarlierVersion(t *testing.T) {
	for _, format := range []string{"jsonl", "parquet"} {
		t.Run(format, func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, filepath.Join("testdata", "v1dir"), root)
			dir := filepath.Join(root, "out-"+format)
			t.Chdir(root) // the manifest names the dataset as rows.jsonl
			out, err := runInspectCmd(t, dir)
			if err != nil {
				t.Fatalf("inspect of the version 1 directory: %v\n%s", err, out)
			}
			if !strings.Contains(out, "dataset  8 keys in rows.jsonl (limit 8): 8 done, 0 failed, 0 pending") {
				t.Errorf("inspect of the version 1 directory:\n%s", out)
			}

			m, url := cliMock(t, nil)
			args := func(extra ...string) []string {
				return append([]string{"run", "--endpoint.base_url", url, "--dataset.path", "rows.jsonl",
					"--output.dir", "out-" + format, "--output.format", format, "--output.shard_size", "3",
					"--concurrency", "4", "--generation.max_tokens", "64", "--quiet"}, extra...)
			}
			r := cliRun(t, args("--dataset.limit", "8", "--quiet=false")...)
			r.ok(t, "same job")
			if m.Stats().Requests != 0 || !strings.Contains(r.stderr, "nothing to do") {
				t.Errorf("the same job asked %d requests:\n%s", m.Stats().Requests, r.stderr)
			}
			cliRun(t, args()...).ok(t, "every row")
			if got := m.Stats().Requests; got != 4 {
				t.Errorf("limit 8 -> all 12 rows asked %d requests, want the 4 new rows", got)
			}
			r = cliRun(t, args("--generation.temperature", "0.9")...)
			if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "generation.temperature: 0.6 (on disk) -> 0.9 (now)") {
				t.Errorf("another temperature: exit %d, %v; want a refusal", exitCode(r.err), r.err)
			}

			out, err = runInspectCmd(t, dir)
			if err != nil || !strings.Contains(out, "dataset  12 keys in rows.jsonl: 12 done, 0 failed, 0 pending") ||
				!strings.Contains(out, "ok: no problems") {
				t.Errorf("inspect after the resume (%v):\n%s", err, out)
			}
		})
	}
}

// copyTree copies the files under from into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOutputFormatsAgree: an output format is added in sink (format.go);
// the config's check of output.format must then know it too.
func TestOutputFormatsAgree(t *testing.T) {
	got := slices.Sorted(slices.Values(config.OutputFormats))
	if want := sink.Formats(); !slices.Equal(got, want) {
		t.Errorf("config.OutputFormats = %v, sink's formats are %v: add the new one to config/validate.go and the output.format help", got, want)
	}
}
