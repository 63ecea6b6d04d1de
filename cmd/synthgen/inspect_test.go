package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/job/plan"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// inspectDataset writes a JSONL dataset of n rows in the messages shape.
func inspectDataset(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"question %d"}]}`+"\n", i)
	}
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// inspectFixture writes an output directory with the real sink: a record
// for each of ids, an error record for each of failed, the manifest
// naming datasetPath and shard ("": the whole dataset).
func inspectFixture(t *testing.T, format, datasetPath string, ids, failed []int, shard string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	sh, err := dataset.ParseShard(shard)
	if err != nil {
		t.Fatal(err)
	}
	j := job.Job{
		Selection: dataset.Selection{Path: datasetPath, Format: "auto", Shard: sh},
		Sampling:  job.Sampling{Model: "m", Samples: 1},
	}
	spec, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sink.Open(sink.Options{
		Dir: dir, Format: format, PartSize: 4,
		Job: sink.JobRecord{Version: "test", Spec: spec, Hash: j.Hash()},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range failed {
		if err := s.WriteError(&sink.ErrorRecord{ID: strconv.Itoa(i), Status: 400, Message: "bad", Attempts: 1, Cause: "http_400"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range ids {
		r := &sink.Record{
			ID: strconv.Itoa(i), Messages: []chat.Message{{Role: "user", Content: "q"}},
			Content: "a", FinishReason: "stop", Model: "m", PromptTokens: 10, CompletionTokens: 100 + i,
			Attempts: 1, CreatedAt: time.UnixMilli(1_700_000_000_000).UTC(),
		}
		if i == 3 {
			r.FinishReason = "length"
		}
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runInspectCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"inspect"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func seq(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

func TestInspectCmdClean(t *testing.T) {
	ds := inspectDataset(t, 10)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 7, 1), []int{7}, "")
	out, err := runInspectCmd(t, dir)
	// Sound, but 2 keys pending and 1 failed: never "ok", and its own exit
	// code, so that 'inspect && export' stops here.
	if exitCode(err) != exitPending || err.Error() != "incomplete: 2 of 10 keys pending, 1 failed for good" {
		t.Fatalf("exit %d: %v, want %d: incomplete: 2 of 10 keys pending, 1 failed for good\n%s", exitCode(err), err, exitPending, out)
	}
	if strings.Contains(out, "ok: no problems") {
		t.Errorf("a job with pending keys is said to be ok:\n%s", out)
	}
	for _, want := range []string{
		"== " + dir + " ==",
		"records  7 in 2 shard files, 7 distinct keys, 0 duplicates",
		"10 keys in " + ds + ": 7 done, 1 failed, 2 pending",
		"1 key failed for good: http_400 1",
		"stop 6 (85.7%), length 1 (14.3%); truncated (length) 14.3%",
		"prompt 70, completion 721",
		"part-000001.jsonl  jsonl  3  ok",
		"runs\n  1  20",
		"sound: no problems, but incomplete: 2 of 10 keys pending, 1 failed for good",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The fixture's run lasts what the machine makes it last.
	if !regexp.MustCompile(`ended after \d+s, 7 records, 1 error, synthgen test`).MatchString(out) {
		t.Errorf("output lacks the run's line (ended after Ns, 7 records, 1 error):\n%s", out)
	}
}

// The acceptance test at the command level: a planted duplicate
// and a corrupt shard are both named, and the exit code is non-zero.
func TestInspectCmdPlanted(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			ds := inspectDataset(t, 12)
			dir := inspectFixture(t, format, ds, seq(0, 12, 1), nil, "")
			data := filepath.Join(dir, "data")
			// Id 5 (in shard 1) written again into a new shard, then shard 2 corrupted.
			dup := inspectFixture(t, format, ds, []int{5}, nil, "")
			copyFile(t, filepath.Join(dup, "data", "part-000000."+format), filepath.Join(data, "part-000009."+format))
			corrupt := filepath.Join(data, "part-000002."+format)
			if format == sink.FormatParquet {
				if err := os.Truncate(corrupt, 100); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(corrupt, []byte("garbage\n"), 0o644); err != nil {
				t.Fatal(err)
			}

			out, err := runInspectCmd(t, dir)
			if code := exitCode(err); code != exitFailure {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, exitFailure, out)
			}
			for _, want := range []string{`duplicate key id="5" sample=0`, "part-000009." + format,
				corrupt + " is corrupt", "move it away", "PROBLEMS (2)"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			// Shard 2's keys are pending again: it must be moved away.
			if !strings.Contains(out, "12 keys in "+ds+": 8 done, 0 failed, 4 pending") {
				t.Errorf("dataset line:\n%s", out)
			}
			msg := err.Error()
			if !strings.Contains(msg, "1 duplicate key") || !strings.Contains(msg, "invalid shard (part-000002."+format+")") {
				t.Errorf("error message %q does not name what is wrong", msg)
			}

			out, err = runInspectCmd(t, "--json", dir)
			if exitCode(err) != exitFailure {
				t.Fatalf("--json exit %d", exitCode(err))
			}
			var doc struct {
				OK   bool `json:"ok"`
				Dirs []struct {
					Duplicates []audit.Duplicate `json:"duplicates"`
					Shards     []audit.Part      `json:"shards"`
					Problems   []string          `json:"problems"`
					Dataset    plan.Plan         `json:"dataset"`
				} `json:"dirs"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("--json output is not JSON: %v\n%s", err, out)
			}
			d := doc.Dirs[0]
			if doc.OK || len(d.Duplicates) != 1 || d.Duplicates[0].ID != "5" || len(d.Problems) != 2 ||
				d.Shards[2].Valid || d.Dataset.Pending != 4 {
				t.Errorf("json %+v", doc)
			}
		})
	}
}

// Two --shard directories: each against its part of the dataset (shard
// from report.json), then combined; a key in both is a duplicate.
func TestInspectCmdShardsCombined(t *testing.T) {
	ds := inspectDataset(t, 10)
	even := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 10, 2), nil, "0/2")
	odd := inspectFixture(t, sink.FormatParquet, ds, []int{1, 3, 5}, nil, "1/2")
	out, err := runInspectCmd(t, even, odd)
	if exitCode(err) != exitPending || err.Error() != "incomplete: 2 of 10 keys pending" {
		t.Fatalf("exit %d: %v, want %d: the combined job's 2 pending keys\n%s", exitCode(err), err, exitPending, out)
	}
	for _, want := range []string{
		"5 keys in " + ds + " shard 0/2: 5 done, 0 failed, 0 pending",
		"ok: no problems, every selected key done", // shard 0/2 alone is done
		"5 keys in " + ds + " shard 1/2: 3 done, 0 failed, 2 pending",
		"== combined: 2 dirs as one dataset ==\nrecords  8, 8 distinct keys, 0 duplicates\ndataset  10 keys in " + ds + ": 8 done, 0 failed, 2 pending",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Two shards of three given: the combined figures say so.
	third0 := inspectFixture(t, sink.FormatJSONL, ds, []int{0, 3, 6, 9}, nil, "0/3")
	third1 := inspectFixture(t, sink.FormatJSONL, ds, []int{1, 4, 7}, nil, "1/3")
	out, _ = runInspectCmd(t, third0, third1)
	if !strings.Contains(out, "2/3 not among the DIRs") {
		t.Errorf("no note about the missing shard:\n%s", out)
	}
	// One directory named twice is one directory: read once, said so,
	// no key of it a duplicate.
	out, err = runInspectCmd(t, even, even+string(filepath.Separator))
	if (err != nil && exitCode(err) == exitFailure) || strings.Contains(out, "duplicate key") || !strings.Contains(out, "given before: read once") {
		t.Errorf("a directory named twice: exit %d, %v\n%s", exitCode(err), err, out)
	}

	// Id 4 (shard 0's) also written into the odd directory.
	stray := inspectFixture(t, sink.FormatJSONL, ds, []int{4}, nil, "")
	copyFile(t, filepath.Join(stray, "data", "part-000000.jsonl"), filepath.Join(odd, "data", "part-000005.jsonl"))
	out, err = runInspectCmd(t, even, odd)
	if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "combined: 1 duplicate key") {
		t.Fatalf("exit %d, err %v, want the combined duplicate", exitCode(err), err)
	}
	if !strings.Contains(out, `duplicate key id="4" sample=0 in `+filepath.Join(even, "data", "part-000000.jsonl")+" and "+filepath.Join(odd, "data", "part-000005.jsonl")) {
		t.Errorf("output does not name both files:\n%s", out)
	}
}

func TestInspectCmdDatasetMoved(t *testing.T) {
	ds := inspectDataset(t, 6)
	dir := inspectFixture(t, sink.FormatJSONL, filepath.Join(t.TempDir(), "gone.jsonl"), seq(0, 4, 1), nil, "")
	out, err := runInspectCmd(t, dir)
	if err != nil {
		t.Fatalf("a moved dataset is not an error: %v", err)
	}
	if !strings.Contains(out, "not readable from here") || !strings.Contains(out, "--dataset PATH") {
		t.Errorf("output does not say the dataset is unreadable:\n%s", out)
	}
	if !strings.Contains(out, "whether its job is complete is unknown") || strings.Contains(out, "ok: no problems") {
		t.Errorf("a job whose dataset cannot be counted is said to be ok:\n%s", out)
	}
	out, err = runInspectCmd(t, "--dataset", ds, dir)
	if exitCode(err) != exitPending || !strings.Contains(out, "6 keys in "+ds+": 4 done, 0 failed, 2 pending") {
		t.Errorf("--dataset: err %v\n%s", err, out)
	}
	// --shard on one directory selects its part.
	out, err = runInspectCmd(t, "--dataset", ds, "--shard", "1/2", dir)
	if exitCode(err) != exitPending || !strings.Contains(out, "3 keys in "+ds+" shard 1/2: 2 done, 0 failed, 1 pending") ||
		!strings.Contains(out, "2 keys on disk are outside this selection") {
		t.Errorf("--shard: err %v\n%s", err, out)
	}
}

func TestInspectCmdManyShards(t *testing.T) {
	ds := inspectDataset(t, 60)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 60, 1), nil, "")
	if err := os.WriteFile(filepath.Join(dir, "data", "part-000003.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runInspectCmd(t, dir)
	if !strings.Contains(out, "shards     15 files: invalid 1, ok 14; not ok:\n  part-000003.jsonl") ||
		strings.Contains(out, "part-000004.jsonl") {
		t.Errorf("many shards are not summarized:\n%s", out)
	}
	out, _ = runInspectCmd(t, "--all-shards", dir)
	if !strings.Contains(out, "part-000004.jsonl") {
		t.Errorf("--all-shards does not list every shard:\n%s", out)
	}
}

func TestInspectCmdUsage(t *testing.T) {
	ds := inspectDataset(t, 2)
	dir := inspectFixture(t, sink.FormatJSONL, ds, []int{0}, nil, "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no dir", nil, "no DIR"},
		{"not an output dir", []string{t.TempDir()}, "not a synthgen output directory"},
		{"missing dir", []string{filepath.Join(t.TempDir(), "nope")}, "no such file"},
		{"shard with two dirs", []string{"--shard", "0/2", dir, dir}, "--shard: only with one DIR"},
		{"bad shard", []string{"--shard", "2/2", dir}, "--shard"},
		{"bad flag", []string{"--nope", dir}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runInspectCmd(t, tt.args...)
			if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("exit %d, err %v; want %d naming %q", exitCode(err), err, exitUsage, tt.want)
			}
		})
	}
	out, err := runInspectCmd(t, "--help")
	if err != nil || !strings.Contains(out, "synthgen inspect out/shard-0 out/shard-1") || !strings.Contains(out, "--dataset string") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The run history says how each run ended: an interrupted run is not a
// finished one, and a run with no end that other runs followed was killed
// (kill -9, OOM, a reboot), not "running now".
func TestInspectRunHistoryOutcomes(t *testing.T) {
	ds := inspectDataset(t, 10)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 7, 1), nil, "")
	m, err := sink.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := m.Runs[0].StartedAt
	at := func(d time.Duration) *time.Time { t := start.Add(d); return &t }
	m.Runs = []sink.Run{
		{StartedAt: start, EndedAt: at(55 * time.Second), Outcome: "interrupted", RecordsWritten: 3},
		{StartedAt: start.Add(time.Minute), RecordsWritten: 2},
		{StartedAt: start.Add(2 * time.Minute), EndedAt: at(150 * time.Second), RecordsWritten: 1}, // before outcomes were recorded
		{StartedAt: start.Add(3 * time.Minute), EndedAt: at(200 * time.Second), Outcome: "done", RecordsWritten: 1},
		{StartedAt: start.Add(4 * time.Minute)},
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sink.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runInspectCmd(t, dir)
	for _, want := range []string{
		"  1  " + start.UTC().Format("2006-01-02 15:04:05Z") + "  interrupted after 55s, 3 records",
		"  2  " + start.Add(time.Minute).UTC().Format("2006-01-02 15:04:05Z") + "  killed (never ended: kill -9, OOM or a reboot; the next run recovered it), 2 records",
		"ended after 30s, 1 record",
		"done in 20s, 1 record",
		"  5  " + start.Add(4*time.Minute).UTC().Format("2006-01-02 15:04:05Z") + "  not ended (running now, or killed), 0 records",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// closedPipe is stdout after `| head` has exited: every write fails as the
// kernel says then.
type closedPipe struct{}

func (closedPipe) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
}

// `synthgen inspect DIR | head`: no "write report: broken pipe" error, the
// verdict's exit code all the same (issue 41).
func TestInspectIntoClosedPipe(t *testing.T) {
	ds := inspectDataset(t, 10)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 7, 1), []int{7}, "")
	for _, f := range []inspectFlags{{}, {json: true}} {
		err := runInspect(closedPipe{}, []string{dir}, f)
		if exitCode(err) != exitPending || strings.Contains(fmt.Sprint(err), "write report") {
			t.Errorf("json=%v: exit %d: %v, want %d: the verdict, not the closed pipe", f.json, exitCode(err), err, exitPending)
		}
	}
	if !readerGone(fmt.Errorf("write report: %w", &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE})) {
		t.Error("readerGone misses a wrapped EPIPE")
	}
}
