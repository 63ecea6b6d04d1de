package main

// The worked pipeline of examples/ (docs/recipes.md, "A worked pipeline"), run as a
// person runs it, against the mock: answer a dataset of its own columns
// (examples/qa-answer.yaml), judge every answer with a second pass whose
// verdicts have a declared shape (examples/qa-judge.yaml), killed with
// SIGKILL mid-pass and resumed, export the answers, keep those scored 8 or
// more with examples/qa-keep.sql in DuckDB.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// verdict is the judge's answer, as examples/qa-judge.yaml's schema says.
type verdict struct {
	Score  int    `json:"score"`
	Reason string `json:"reason"`
}

func TestWorkedPipeline(t *testing.T) {
	t.Parallel()      // its own mocks, directories and processes
	synthgenBinary(t) // the runs are the binary's, with no SYNTHGEN_* of this shell (childEnv)
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	rows := readQARows(t, filepath.Join(examples, "data", "qa.jsonl"))
	work := t.TempDir()
	answers, judged := filepath.Join(work, "out", "qa-answers"), filepath.Join(work, "out", "qa-judged")
	// A fifth of the verdicts out of shape: each asked again (cause
	// schema), up to schema_retries more times, as a model that does not
	// always keep to it.
	m := startMock(t, mockserver.Options{TokenDelay: 4 * time.Millisecond, MeanTokens: 40, Seed: 11, RateInvalidJSON: 0.2})
	run := func(cfg string, extra ...string) []string {
		return append([]string{"run", "--config", filepath.Join(examples, cfg), "--endpoint.base_url", m.BaseURL,
			"--progress.interval", "100ms", "--log-format", "json", "--output.sync_interval", "50ms", "--output.shard_size", "16"}, extra...)
	}

	// 1. Answer.
	first := startSynthgen(t, "answer", run("qa-answer.yaml", "--dataset.path", filepath.Join(examples, "data", "qa.jsonl"), "--output.dir", answers)...)
	if code := first.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("first pass: exit %d\n%s", code, first.stderr(t))
	}
	answerCfg, err := config.Load(nil, filepath.Join(examples, "qa-answer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := readInventory(answers)
	if err != nil || len(a.Records) != len(rows) {
		t.Fatalf("first pass: %v, %d records for %d rows", err, len(a.Records), len(rows))
	}
	for i, row := range rows {
		rec := a.Records[sink.Key{ID: strconv.Itoa(i)}]
		want := []chat.Message{
			{Role: "system", Content: fmt.Sprintf("Answer in %s, from the context given, in a few sentences.", row["lang"])},
			{Role: "user", Content: fmt.Sprintf("Context: %s\n\nQuestion: %s\n", row["context"], row["question"])},
		}
		if !reflect.DeepEqual(rec.Messages, want) {
			t.Errorf("row %d was asked %q, want %q (the template of %s)", i, rec.Messages, want, "qa-answer.yaml")
		}
	}
	if len(answerCfg.Prompt.Messages) != 2 {
		t.Errorf("qa-answer.yaml's prompt.messages: %+v", answerCfg.Prompt.Messages)
	}

	// 2. Judge, killed mid-pass twice, then resumed to its end. Four in
	// flight make the pass last long enough to be cut.
	judgeArgs := run("qa-judge.yaml", "--dataset.path", answers, "--output.dir", judged, "--concurrency", "4", "--generation.schema_retries", "8")
	for k, at := range []int64{int64(len(rows) / 5), int64(len(rows) / 2)} {
		p := startSynthgen(t, fmt.Sprintf("judge%d", k), judgeArgs...)
		waitDone(t, p, at, 60*time.Second)
		if p.exited() {
			t.Fatalf("judge run %d ended before its kill at done %d:\n%s", k, at, p.stderr(t))
		}
		_ = p.cmd.Process.Kill()
		<-p.done
		inv, err := readInventory(judged)
		if err != nil {
			t.Fatalf("after kill %d: %v", k+1, err)
		}
		if n := len(inv.Records); n == 0 || n >= len(rows) {
			t.Fatalf("kill %d left %d of %d verdicts: not mid-pass", k+1, n, len(rows))
		}
	}
	final := startSynthgen(t, "judge-final", judgeArgs...)
	if code := final.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("judge, final run: exit %d\n%s", code, final.stderr(t))
	}
	j, err := readInventory(judged) // no key twice
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Records) != len(a.Records) || j.Errors > 0 || len(j.Temps) > 0 {
		t.Errorf("%d verdicts (%d error records, temporaries %v) for %d answers: want every answer judged once", len(j.Records), j.Errors, j.Temps, len(a.Records))
	}
	if st := m.Stats(); st.InvalidJSON == 0 {
		t.Errorf("the mock spoiled no verdict: the retries were not exercised (%+v)", st)
	}
	scores := map[string]int{}
	for k, ans := range a.Records {
		rec, ok := j.Records[sink.Key{ID: k.ID}] // n is 1: the ids are the answers'
		if !ok {
			t.Errorf("answer %s was not judged", k.ID)
			continue
		}
		var v verdict
		dec := json.NewDecoder(strings.NewReader(rec.Content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.Score < 1 || v.Score > 10 {
			t.Errorf("verdict %s: %q is not {score 1-10, reason} (%v)", k.ID, rec.Content, err)
		}
		scores[k.ID] = v.Score
		if want := "Answer: " + ans.Content + "\n"; len(rec.Messages) != 2 || !strings.HasSuffix(rec.Messages[1].Content, want) ||
			!strings.Contains(rec.Messages[1].Content, ans.Messages[1].Content) {
			t.Errorf("verdict %s was asked %q: want the answer's question and %q", k.ID, rec.Messages, want)
		}
	}

	// 3. Export the answers as training rows.
	all := filepath.Join(work, "out", "qa-all.jsonl")
	cliRun(t, "export", answers, "--format", "messages", "--reasoning", "drop", "--out", all).ok(t, "export")
	exported := readJSONLines(t, all)

	// 4. Keep those scored 8 or more: examples/qa-keep.sql as it is, from
	// the directory holding out/.
	t.Run("keep with DuckDB", func(t *testing.T) {
		modules, node := duckdbModules(t)
		script, err := filepath.Abs(filepath.Join("testdata", "duckdb_sql.mjs"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, script, filepath.Join(examples, "qa-keep.sql"))
		cmd.Dir = work
		cmd.Env = append(childEnv(), "NODE_PATH="+modules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("qa-keep.sql: %v\n%s", err, out)
		}
		kept := readJSONLines(t, filepath.Join(work, "out", "qa-train.jsonl"))
		var want []map[string]any
		for _, row := range exported {
			if scores[row["id"].(string)] >= 8 {
				want = append(want, row)
			}
		}
		if len(want) == 0 || len(want) == len(exported) {
			t.Fatalf("%d of %d answers scored 8 or more: the mock's scores do not test the keep", len(want), len(exported))
		}
		if !reflect.DeepEqual(kept, want) {
			t.Errorf("qa-train.jsonl holds %d rows, want the %d exported rows scored 8 or more, in id order:\ngot  %v\nwant %v", len(kept), len(want), kept, want)
		}
		t.Logf("%d of %d answers kept (score >= 8)", len(kept), len(exported))
	})
}

// readQARows reads the example's dataset.
func readQARows(t *testing.T, path string) []map[string]any {
	t.Helper()
	rows := readJSONLines(t, path)
	if len(rows) < 40 {
		t.Fatalf("%s: %d rows", path, len(rows))
	}
	return rows
}

// readJSONLines decodes every line of a JSONL file.
func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
