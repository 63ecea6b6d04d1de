package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/internal/mockserver"
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

func readStatus(t *testing.T, dir string) generator.StatusRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, generator.StatusFile))
	if err != nil {
		t.Fatal(err)
	}
	var st generator.StatusRecord
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
	job := cliJob{baseURL: url, data: cliDataset(t, 60, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, job.args()...)
	r.ok(t, "no parser")
	if n := strings.Count(r.stderr, "warning: "); n != 1 {
		t.Errorf("stderr has %d warnings, want the one, once:\n%s", n, r.stderr)
	}
	for _, want := range []string{"of the first 20 answers have no reasoning", "--reasoning-parser", "deepseek_r1"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	wantIDs(t, "no parser", cliRecords(t, job.dir), idRange(0, 60)...)
	st := readStatus(t, job.dir)
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "--reasoning-parser") {
		t.Errorf("status.json warnings %q, want the one about --reasoning-parser", st.Warnings)
	}
	if st.State != generator.StateDone {
		t.Errorf("status.json state %q, want done", st.State)
	}

	// A server with a parser: no warning, no warnings field.
	_, good := cliMock(t, nil)
	job2 := cliJob{baseURL: good, data: job.data, dir: filepath.Join(t.TempDir(), "out")}
	r = cliRun(t, job2.args("--dataset.limit", "25")...)
	r.ok(t, "parser")
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("a server with a reasoning parser got a warning:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(job2.dir, generator.StatusFile)); strings.Contains(string(b), "warnings") {
		t.Errorf("status.json has warnings:\n%s", b)
	}
}

// TestRunRequireReasoning: with generation.require_reasoning the same
// server stops the run: intake drains after the first answers, the exit is
// 1 with the fix as the hint, and the records written are kept (a rerun
// against a fixed server resumes).
func TestRunRequireReasoning(t *testing.T) {
	m, url := noParserMock(t)
	job := cliJob{baseURL: url, data: cliDataset(t, 200, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, job.args("--generation.require_reasoning", "--concurrency", "2")...)
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
	written := cliRecords(t, job.dir)
	if len(written) < 20 {
		t.Errorf("%d records kept, want the first 20 answers at least", len(written))
	}
	st := readStatus(t, job.dir)
	if st.State != generator.StateFailed || len(st.Warnings) != 1 {
		t.Errorf("status.json state %q warnings %q, want failed with the warning", st.State, st.Warnings)
	}

	// The fixed server: the same command resumes, asking only the rest.
	_, good := cliMock(t, nil)
	job.baseURL = good
	cliRun(t, job.args("--generation.require_reasoning")...).ok(t, "fixed server")
	wantIDs(t, "resumed", cliRecords(t, job.dir), idRange(0, 200)...)
}
