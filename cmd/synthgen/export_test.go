package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// exportJob runs `synthgen run` against the mock into one directory per
// shard of n (n = 0: one directory, the whole dataset) and returns them.
func exportJob(t *testing.T, prompts, n int, extra ...string) []string {
	t.Helper()
	_, url := cliMock(t, nil)
	data := cliDataset(t, prompts, 0)
	root := t.TempDir()
	var dirs []string
	for i := range max(n, 1) {
		j := cliJob{baseURL: url, data: data, dir: filepath.Join(root, "shard-"+strconv.Itoa(i))}
		args := j.args(extra...)
		if n > 0 {
			args = append(args, "--shard", strconv.Itoa(i)+"/"+strconv.Itoa(n))
		}
		cliRun(t, args...).ok(t, "run "+j.dir)
		dirs = append(dirs, j.dir)
	}
	return dirs
}

func exportIDs(t *testing.T, path, field string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var row map[string]any
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("%s: %v: %s", path, err, line)
		}
		ids = append(ids, row[field].(string))
	}
	return ids
}

// TestExportShardsInIDOrder: the three --shard directories of one job
// export as one file, every id once, decimal ids in numeric order.
func TestExportShardsInIDOrder(t *testing.T) {
	t.Parallel()
	const prompts = 30
	dirs := exportJob(t, prompts, 3, "--generation.max_tokens", "100000")
	out := filepath.Join(t.TempDir(), "train.jsonl")
	r := cliRun(t, append(append([]string{"export"}, dirs...), "--format", "messages", "--out", out, "--keep-truncated")...)
	r.ok(t, "export")
	emptyAnswer := map[string]bool{}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "data", "*.jsonl"))
		for _, f := range files {
			if err := sink.ForEachRecord(f, func(rec *sink.Record, _ sink.Span) error {
				emptyAnswer[rec.ID] = strings.TrimSpace(rec.Content) == ""
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The mock answers some prompts with reasoning only: those are
	// dropped as empty, every other id is there once, in numeric order.
	var want []string
	for i := range prompts {
		if !emptyAnswer[strconv.Itoa(i)] {
			want = append(want, strconv.Itoa(i))
		}
	}
	if got := exportIDs(t, out, "id"); !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v (0..%d in numeric order but the empty answers)", got, want, prompts-1)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("30 records read from 3 directories; %d rows written to %s (messages)", len(want), out)) ||
		!strings.Contains(r.stderr, fmt.Sprintf("dropped  empty      %d:", prompts-len(want))) {
		t.Errorf("summary:\n%s", r.stderr)
	}
}

// TestExportRefusesInvalid: directories holding the same keys twice, and
// directories of different jobs, are refused with exit 1, the problems
// and what to do; nothing is written.
func TestExportRefusesInvalid(t *testing.T) {
	t.Parallel()
	a := exportJob(t, 6, 0)
	b := exportJob(t, 6, 0)
	out := filepath.Join(t.TempDir(), "train.jsonl")
	r := cliRun(t, "export", a[0], b[0], "--format", "specforge", "--out", out)
	if exitCode(r.err) != exitFailure || !strings.Contains(r.err.Error(), "duplicate") ||
		!strings.Contains(r.stderr, "keep one copy") || !strings.Contains(r.hint(), "synthgen inspect") {
		t.Errorf("same keys twice: exit %d, err %v, hint %q\nstderr:\n%s", exitCode(r.err), r.err, r.hint(), r.stderr)
	}
	c := exportJob(t, 6, 0, "--generation.temperature", "0.1")
	r = cliRun(t, "export", a[0], c[0], "--format", "specforge", "--out", out)
	if exitCode(r.err) != exitFailure || !strings.Contains(r.err.Error(), "different settings") {
		t.Errorf("different jobs: exit %d, err %v", exitCode(r.err), r.err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written by a refused export", out)
	}
	r = cliRun(t, "export", a[0], "--format", "alpaca", "--out", out)
	if exitCode(r.err) != exitUsage {
		t.Errorf("--format alpaca: exit %d, err %v", exitCode(r.err), r.err)
	}
	r = cliRun(t, "export", t.TempDir(), "--format", "specforge", "--out", out)
	if exitCode(r.err) != exitUsage {
		t.Errorf("not an output directory: exit %d, err %v", exitCode(r.err), r.err)
	}
}

// TestExportParquetReadByDuckDB: an HF export's Parquet files read in
// DuckDB as a list of structs per row, every row once, in id order.
func TestExportParquetReadByDuckDB(t *testing.T) {
	t.Parallel()
	modules, node := duckdbModules(t)
	dirs := exportJob(t, 12, 2, "--generation.max_tokens", "100000")
	out := filepath.Join(t.TempDir(), "ds")
	cliRun(t, append(append([]string{"export"}, dirs...), "--format", "specforge", "--hf", "--rows-per-file", "5", "--out", out)...).ok(t, "export")
	stdout := duckdbExport(t, modules, node, filepath.Join(out, "data", "*.parquet"))
	var got struct {
		Columns []struct{ Name, Type string }
		Rows    int
		IDs     []string
		First   struct {
			ID            string           `json:"id"`
			Conversations []map[string]any `json:"conversations"`
		}
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	types := map[string]string{}
	for _, c := range got.Columns {
		types[c.Name] = strings.ReplaceAll(c.Type, `"`, "")
	}
	if want := "STRUCT(role VARCHAR, content VARCHAR, reasoning_content VARCHAR, tool_calls " + duckdbToolCalls + ", tool_call_id VARCHAR)[]"; types["conversations"] != want {
		t.Errorf("conversations: DuckDB type %q, want %q", types["conversations"], want)
	}
	jsonl := filepath.Join(t.TempDir(), "t.jsonl")
	cliRun(t, append(append([]string{"export"}, dirs...), "--format", "specforge", "--out", jsonl)...).ok(t, "export jsonl")
	if want := exportIDs(t, jsonl, "id"); !slices.Equal(got.IDs, want) || len(want) < 6 {
		t.Errorf("ids %v, want %v", got.IDs, want)
	}
	conv := got.First.Conversations
	if len(conv) != 2 || conv[0]["role"] != "user" || conv[1]["role"] != "assistant" || conv[1]["content"] == "" {
		t.Errorf("first row's conversations as DuckDB reads them: %v", conv)
	}
}

// TestExportRefusesAnIncompleteJob: a sound directory holding 7 of its 10
// keys (2 pending, 1 failed) is no training file without --partial: the
// export refuses with exit 4 and the counts, and writes nothing; with
// --partial it writes the 7 and says what they lack.
func TestExportRefusesAnIncompleteJob(t *testing.T) {
	ds := inspectDataset(t, 10)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 7, 1), []int{7}, "")
	out := filepath.Join(t.TempDir(), "train.jsonl")
	r := cliRun(t, "export", dir, "--format", "messages", "--out", out)
	if exitCode(r.err) != exitPending || !strings.Contains(r.err.Error(), "2 of 10 keys pending, 1 failed for good") ||
		!strings.Contains(r.hint(), "--partial") {
		t.Errorf("incomplete job: exit %d, err %v, hint %q; want %d naming the counts and --partial", exitCode(r.err), r.err, r.hint(), exitPending)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written by a refused export", out)
	}
	r = cliRun(t, "export", dir, "--format", "messages", "--keep-truncated", "--out", out, "--partial")
	if r.err != nil {
		t.Fatalf("--partial: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, "partial (--partial): the job is incomplete: 2 of 10 keys pending, 1 failed for good") {
		t.Errorf("--partial does not say what the file lacks:\n%s", r.stderr)
	}
	if ids := exportIDs(t, out, "id"); len(ids) != 7 {
		t.Errorf("--partial wrote %d rows, want the 7 done", len(ids))
	}
}

// TestExportNeverDestroysData: export refuses an --out that exists (unless
// --overwrite), one inside an output directory (its manifest, a part), a
// file of the dataset being read, and a directory where a file is meant;
// a directory named twice is exported once.
func TestExportNeverDestroysData(t *testing.T) {
	ds := inspectDataset(t, 4)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 4, 1), nil, "")
	export := func(out string, extra ...string) cliResult {
		return cliRun(t, append([]string{"export", dir, "--format", "messages", "--out", out}, extra...)...)
	}
	unchanged := fileHashes(t, dir)
	before, err := os.ReadFile(ds)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, out string }{
		{"the manifest", filepath.Join(dir, "manifest.json")},
		{"a part", filepath.Join(dir, "data", "part-000000.jsonl")},
		{"a new part", filepath.Join(dir, "data", "part-000099.jsonl")},
		{"the dataset", ds},
		{"--overwrite does not make the dataset fair game", ds},
	} {
		extra := []string{}
		if strings.HasPrefix(tc.name, "--overwrite") {
			extra = append(extra, "--overwrite")
		}
		if r := export(tc.out, extra...); exitCode(r.err) != exitUsage {
			t.Errorf("%s: exit %d (%v), want %d", tc.name, exitCode(r.err), r.err, exitUsage)
		}
	}
	if got := fileHashes(t, dir); !maps.Equal(got, unchanged) {
		t.Error("a refused export changed the output directory")
	}
	if after, _ := os.ReadFile(ds); string(after) != string(before) {
		t.Error("a refused export changed the dataset")
	}

	out := filepath.Join(t.TempDir(), "train.jsonl")
	if r := export(out); r.err != nil {
		t.Fatal(r.err)
	}
	if r := export(out); exitCode(r.err) != exitUsage || !strings.Contains(r.hint(), "--overwrite") {
		t.Errorf("an existing --out: exit %d (%v), hint %q; want %d and --overwrite", exitCode(r.err), r.err, r.hint(), exitUsage)
	}
	if r := export(out, "--overwrite"); r.err != nil {
		t.Errorf("--overwrite: %v", r.err)
	}
	if r := export(t.TempDir()); exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "is a directory") {
		t.Errorf("--out a directory: exit %d (%v)", exitCode(r.err), r.err)
	}
	twice := filepath.Join(t.TempDir(), "twice.jsonl")
	r := cliRun(t, "export", dir, dir+string(filepath.Separator), "--format", "messages", "--keep-truncated", "--out", twice)
	if r.err != nil || !strings.Contains(r.stderr, "read once") {
		t.Fatalf("one directory named twice: %v\n%s", r.err, r.stderr)
	}
	if ids := exportIDs(t, twice, "id"); len(ids) != 4 {
		t.Errorf("one directory named twice: %d rows, want its 4 once", len(ids))
	}
}

// fileHashes is every file under dir with its bytes' hash, to prove that
// nothing there changed.
func fileHashes(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExportBatchKeepsTruncated: a batch results file is every request's
// answer (the Batch API and vllm run-batch return cut ones with their
// finish_reason), so openai-batch keeps answers cut at max_tokens unless
// told otherwise; the training formats drop them.
func TestExportBatchKeepsTruncated(t *testing.T) {
	ds := inspectDataset(t, 4)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 4, 1), nil, "")
	rows := func(format string, extra ...string) int {
		out := filepath.Join(t.TempDir(), "out.jsonl")
		r := cliRun(t, append([]string{"export", dir, "--format", format, "--out", out}, extra...)...)
		if r.err != nil {
			t.Fatalf("%s: %v\n%s", format, r.err, r.stderr)
		}
		return len(readLines(t, out))
	}
	training, batch := rows("messages"), rows("openai-batch")
	if batch != 4 || training != 3 {
		t.Errorf("rows: openai-batch %d, messages %d; want the 4 answers in the batch file, the 3 uncut in the training one", batch, training)
	}
	if n := rows("openai-batch", "--keep-truncated=false"); n != 3 {
		t.Errorf("openai-batch --keep-truncated=false: %d rows, want 3", n)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestExportHFOverwrite: an --hf --out that exists is refused with exit 2,
// naming it and what to do: a dataset an earlier export wrote is replaced
// with --overwrite; any other directory never (it holds the user's files),
// nor a file.
func TestExportHFOverwrite(t *testing.T) {
	ds := inspectDataset(t, 4)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 4, 1), nil, "")
	export := func(out string, extra ...string) cliResult {
		return cliRun(t, append([]string{"export", dir, "--format", "messages", "--hf", "--out", out}, extra...)...)
	}
	out := filepath.Join(t.TempDir(), "ds")
	export(out).ok(t, "export --hf")
	r := export(out)
	if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "--out "+out+" exists (a dataset an earlier export wrote)") ||
		!strings.Contains(r.hint(), "pass --overwrite to replace it, or give another path") {
		t.Errorf("an earlier export's dataset: exit %d, err %v, hint %q", exitCode(r.err), r.err, r.hint())
	}
	if r := export(out, "--overwrite", "--keep-truncated"); r.err != nil {
		t.Fatalf("--overwrite: %v\n%s", r.err, r.stderr)
	}
	if got := names(t, filepath.Dir(out)); !slices.Equal(got, []string{"ds"}) {
		t.Errorf("beside the replaced dataset: %v", got)
	}
	mine := t.TempDir()
	if err := os.WriteFile(filepath.Join(mine, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--overwrite"}} {
		r := export(mine, extra...)
		if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "--out "+mine+" exists and is no dataset an export wrote (it holds notes.txt)") ||
			!strings.Contains(r.hint(), "give --hf a new directory") {
			t.Errorf("a directory of the user's %v: exit %d, err %v, hint %q", extra, exitCode(r.err), r.err, r.hint())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(mine, "notes.txt")); string(b) != "mine" {
		t.Error("the user's file is gone")
	}
	file := filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := export(file, "--overwrite"); exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "exists and is not a directory") {
		t.Errorf("--hf over a file: exit %d, err %v", exitCode(r.err), r.err)
	}
}

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
