package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
)

// noParserMock is a server without a reasoning parser: the thought comes
// inside content, in <think> tags, and no reasoning field.
func noParserMock(t *testing.T) (*mockserver.Server, string) {
	t.Helper()
	m := mockserver.New(mockserver.Options{MeanTokens: 16, Seed: 7, ReasoningField: mockserver.FieldNone})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts.URL + "/v1"
}

func readStatus(t *testing.T, dir string) runfiles.StatusRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, runfiles.StatusFile))
	if err != nil {
		t.Fatal(err)
	}
	var st runfiles.StatusRecord
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRunWarnsWithoutReasoningParser: against a server that sends no
// reasoning (vLLM without --reasoning-parser), the run says so once, after
// its first 20 answers, on stderr and in status.json, with the fix; it
// still writes every record and exits 0.
func TestRunWarnsWithoutReasoningParser(t *testing.T) {
	_, url := noParserMock(t)
	cj := cliJob{baseURL: url, data: cliDataset(t, 60, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args()...)
	r.ok(t, "no parser")
	if n := strings.Count(r.stderr, "warning: "); n != 1 {
		t.Errorf("stderr has %d warnings, want the one, once:\n%s", n, r.stderr)
	}
	for _, want := range []string{"of the first 20 answers have no reasoning", "--reasoning-parser", "deepseek_r1"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	wantIDs(t, "no parser", cliRecords(t, cj.dir), idRange(0, 60)...)
	st := readStatus(t, cj.dir)
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "--reasoning-parser") {
		t.Errorf("status.json warnings %q, want the one about --reasoning-parser", st.Warnings)
	}
	if st.State != runfiles.StateDone {
		t.Errorf("status.json state %q, want done", st.State)
	}

	// A server with a parser: no warning, no warnings field.
	_, good := cliMock(t, nil)
	job2 := cliJob{baseURL: good, data: cj.data, dir: filepath.Join(t.TempDir(), "out")}
	r = cliRun(t, job2.args("--dataset.limit", "25")...)
	r.ok(t, "parser")
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("a server with a reasoning parser got a warning:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(job2.dir, runfiles.StatusFile)); strings.Contains(string(b), "warnings") {
		t.Errorf("status.json has warnings:\n%s", b)
	}
}

// TestRunRequireReasoning: with generation.require_reasoning the same
// server stops the run: intake drains after the first answers, the exit is
// 1 with the fix as the hint, and the records written are kept (a rerun
// against a fixed server resumes).
func TestRunRequireReasoning(t *testing.T) {
	m, url := noParserMock(t)
	cj := cliJob{baseURL: url, data: cliDataset(t, 200, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--generation.require_reasoning", "--concurrency", "2")...)
	if code := exitCode(r.err); r.err == nil || code != exitFailure {
		t.Fatalf("exit %d (%v), want %d\nstderr:\n%s", code, r.err, exitFailure, r.stderr)
	}
	if !strings.Contains(r.err.Error(), "no reasoning") || !strings.Contains(r.hint(), "--reasoning-parser") {
		t.Errorf("error %q hint %q: want the finding and the fix", r.err, r.hint())
	}
	// Intake stopped at the 20th answer: at most the requests then in
	// flight came after it.
	if got := m.Stats().Requests; got >= 200 || got < 20 {
		t.Errorf("%d requests: want the run stopped soon after 20 of 200", got)
	}
	written := cliRecords(t, cj.dir)
	if len(written) < 20 {
		t.Errorf("%d records kept, want the first 20 answers at least", len(written))
	}
	st := readStatus(t, cj.dir)
	if st.State != runfiles.StateFailed || len(st.Warnings) != 1 {
		t.Errorf("status.json state %q warnings %q, want failed with the warning", st.State, st.Warnings)
	}

	// The fixed server: the same command resumes, asking only the rest.
	_, good := cliMock(t, nil)
	cj.baseURL = good
	cliRun(t, cj.args("--generation.require_reasoning")...).ok(t, "fixed server")
	wantIDs(t, "resumed", cliRecords(t, cj.dir), idRange(0, 200)...)
}

// TestInspectReasoningShares: inspect gives the share of records without
// reasoning and with think tags in content, as a line and in --json, and
// notes a directory written by a server without a reasoning parser.
func TestInspectReasoningShares(t *testing.T) {
	_, raw := noParserMock(t)
	_, parsed := cliMock(t, nil)
	data := cliDataset(t, 12, 0)
	bad := cliJob{baseURL: raw, data: data, dir: filepath.Join(t.TempDir(), "out")}
	good := cliJob{baseURL: parsed, data: data, dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, bad.args()...).ok(t, "no parser")
	cliRun(t, good.args()...).ok(t, "parser")

	r := cliRun(t, "inspect", bad.dir)
	r.ok(t, "inspect no parser") // a finding, not a problem: the records are whole
	if !strings.Contains(r.stdout, "reason   empty in 12 (100.0%); <think> tags in content in 12 (100.0%)") {
		t.Errorf("inspect does not give the shares:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "without a reasoning parser") || !strings.Contains(r.stdout, "--reasoning-parser") {
		t.Errorf("inspect does not note the missing reasoning parser:\n%s", r.stdout)
	}
	r = cliRun(t, "inspect", "--json", bad.dir)
	r.ok(t, "inspect --json")
	var out struct {
		Dirs []struct {
			EmptyReasoning      int64   `json:"empty_reasoning"`
			EmptyReasoningShare float64 `json:"empty_reasoning_share"`
			ThinkTags           int64   `json:"think_tags"`
			ThinkTagsShare      float64 `json:"think_tags_share"`
		} `json:"dirs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if d := out.Dirs[0]; d.EmptyReasoning != 12 || d.EmptyReasoningShare != 1 || d.ThinkTags != 12 || d.ThinkTagsShare != 1 {
		t.Errorf("--json: %+v, want 12 records (share 1) of each", d)
	}

	r = cliRun(t, "inspect", good.dir)
	r.ok(t, "inspect parser")
	if !strings.Contains(r.stdout, "reason   empty in 0 (0.0%); <think> tags in content in 0 (0.0%)") || strings.Contains(r.stdout, "reasoning parser") {
		t.Errorf("inspect of a parsed directory:\n%s", r.stdout)
	}
}
