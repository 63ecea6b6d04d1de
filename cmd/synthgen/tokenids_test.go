package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/tokenids"
	"github.com/synthgen/synthgen/sink"
)

// tokenArgs ask for ids and k logprobs.
func tokenArgs(k int) []string {
	return []string{"--generation.return_token_ids", "--generation.logprobs", fmt.Sprint(k)}
}

// checkTokens asserts that an answer's tokens are what the mock generated
// for it: the prompt's ids those of the messages it was sent (msgs), the
// answer's one a generated piece, spelling its text, as many as
// usage.completion_tokens, and k logprobs a token, by id, the token first.
func checkTokens(t testing.TB, what string, msgs []chat.Message, reasoning, content string, completion int,
	prompt, ids []int32, mismatch string, lp *sink.Logprobs, k int) {
	t.Helper()
	var contents []string
	for _, m := range msgs {
		contents = append(contents, m.Content)
	}
	if want := tokenids.Prompt(contents...); !slices.Equal(prompt, want) {
		t.Errorf("%s: prompt ids %v, want the mock's for what was sent, %v", what, prompt, want)
	}
	spelled, ok := mockSpelling(ids)
	if !ok {
		t.Errorf("%s: ids %v: some are none the mock generates", what, ids)
		return
	}
	if spelled != reasoning+content {
		t.Errorf("%s: the ids spell %q, the answer is %q", what, spelled, reasoning+content)
	}
	if len(ids) != completion || mismatch != "" {
		t.Errorf("%s: %d ids, completion_tokens %d, token_ids_mismatch %q", what, len(ids), completion, mismatch)
	}
	if k == 0 {
		if lp != nil {
			t.Errorf("%s: logprobs unasked: %+v", what, lp)
		}
		return
	}
	if lp == nil {
		t.Errorf("%s: no logprobs", what)
		return
	}
	if len(lp.TokenLogprobs) != len(ids) || len(lp.TopIDs) != len(ids) || len(lp.TopLogprobs) != len(ids) || len(lp.TopTokens) != 0 {
		t.Errorf("%s: %d logprobs, %d alternatives by id, %d by text, for %d ids", what, len(lp.TokenLogprobs), len(lp.TopIDs), len(lp.TopTokens), len(ids))
		return
	}
	for i, id := range ids {
		if len(lp.TopIDs[i]) != k || lp.TopIDs[i][0] != id || lp.TopLogprobs[i][0] != lp.TokenLogprobs[i] {
			t.Errorf("%s: token %d (id %d): alternatives %v %v, logprob %v", what, i, id, lp.TopIDs[i], lp.TopLogprobs[i], lp.TokenLogprobs[i])
			return
		}
	}
}

// mockSpelling is the text ids spell, and whether each is a token the
// mock generates.
func mockSpelling(ids []int32) (string, bool) {
	var b strings.Builder
	for _, id := range ids {
		p, ok := tokenids.Text(id)
		if !ok {
			return "", false
		}
		b.WriteString(p)
	}
	return b.String(), true
}

// dirRecords reads every record of DIR's final parts by the sink's reader.
func dirRecords(t testing.TB, dir string) map[string]sink.Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "data", "part-*"))
	out := map[string]sink.Record{}
	for _, f := range files {
		if err := sink.ForEachRecord(f, func(r *sink.Record, _ sink.Span) error {
			if _, dup := out[r.ID]; dup {
				t.Errorf("id %s twice", r.ID)
			}
			out[r.ID] = *r
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRunTokenIDs: with return_token_ids and logprobs, every record holds
// the mock's ids for its prompt and answer and their logprobs, streamed
// and plain alike, in JSONL and Parquet; the same job gives the same ids
// either way.
func TestRunTokenIDs(t *testing.T) {
	t.Parallel()
	_, url := cliMock(t, nil)
	data := cliDataset(t, 40, 0)
	var first map[string]sink.Record
	for _, format := range []string{"jsonl", "parquet"} {
		for _, stream := range []bool{true, false} {
			what := fmt.Sprintf("%s stream=%v", format, stream)
			cj := cliJob{baseURL: url, data: data, dir: filepath.Join(t.TempDir(), "out")}
			cliRun(t, cj.args(append(tokenArgs(4), "--output.format", format, fmt.Sprintf("--generation.stream=%v", stream))...)...).ok(t, what)
			recs := dirRecords(t, cj.dir)
			if len(recs) != 40 {
				t.Fatalf("%s: %d records", what, len(recs))
			}
			for id, r := range recs {
				checkTokens(t, what+" id "+id, r.Messages, r.Reasoning, r.Content, r.CompletionTokens, r.PromptTokenIDs, r.TokenIDs, r.TokenIDsMismatch, r.Logprobs, 4)
			}
			if first == nil {
				first = recs
				continue
			}
			for id, r := range recs {
				if !slices.Equal(r.TokenIDs, first[id].TokenIDs) || !reflect.DeepEqual(r.Logprobs, first[id].Logprobs) {
					t.Errorf("%s: id %s's tokens differ from the first run's", what, id)
				}
			}
		}
	}
}

// writeTurns writes n rows of turns user turns, each answered by the
// dataset, for generation.turns all.
func writeTurns(t *testing.T, n, turns int) string {
	t.Helper()
	return writeShareGPTTurns(t, t.TempDir(), n, turns)
}

// checkTurnsTokens asserts each turn of r holds the ids of its own request
// (the model's earlier answers in its prompt) and answer, and the record
// the last turn's.
func checkTurnsTokens(t testing.TB, what string, r sink.Record, turns, k int) {
	t.Helper()
	if len(r.Turns) != turns {
		t.Errorf("%s: %d turns", what, len(r.Turns))
		return
	}
	for i, tn := range r.Turns {
		sent := r.Messages[:2*i+1] // turn i was sent the user turns and answers before it
		checkTokens(t, fmt.Sprintf("%s turn %d", what, i), sent, tn.Reasoning, tn.Content, tn.CompletionTokens, tn.PromptTokenIDs, tn.TokenIDs, tn.TokenIDsMismatch, tn.Logprobs, k)
	}
	last := r.Turns[turns-1]
	if !slices.Equal(r.TokenIDs, last.TokenIDs) || !slices.Equal(r.PromptTokenIDs, last.PromptTokenIDs) || !reflect.DeepEqual(r.Logprobs, last.Logprobs) {
		t.Errorf("%s: the record's tokens are not the last turn's", what)
	}
}

// TestRunTokenIDsWholeConversations: with turns: all, turn k's prompt ids
// are those of what the server was sent for turn k, the model's own
// earlier answers in it.
func TestRunTokenIDsWholeConversations(t *testing.T) {
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: writeTurns(t, 12, 3), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args(append(tokenArgs(2), "--generation.turns", "all", "--output.format", "parquet")...)...).ok(t, "turns all")
	recs := dirRecords(t, cj.dir)
	if len(recs) != 12 {
		t.Fatalf("%d records", len(recs))
	}
	for id, r := range recs {
		checkTurnsTokens(t, "id "+id, r, 3, 2)
	}
}

// ignoringMock is a server that does not know return_token_ids.
func ignoringMock(t *testing.T) (*mockserver.Server, string) {
	t.Helper()
	m := mockserver.New(mockserver.Options{MeanTokens: 16, Seed: 7, IgnoreTokenIDs: true})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts.URL + "/v1"
}

// TestRunWarnsWhenServerIgnoresTokenIDs: the run says once, after its
// first 20 answers, on stderr and in status.json, that the server sends no
// ids, with the fix; the records say their counts disagree; exit 0.
func TestRunWarnsWhenServerIgnoresTokenIDs(t *testing.T) {
	_, url := ignoringMock(t)
	cj := cliJob{baseURL: url, data: cliDataset(t, 50, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--generation.return_token_ids")...)
	r.ok(t, "ignoring server")
	if n := strings.Count(r.stderr, "warning: "); n != 1 || !strings.Contains(r.stderr, "none of the first 20 answers carries token ids") || !strings.Contains(r.stderr, "vLLM 0.10.2") {
		t.Errorf("stderr, want the one warning with the fix:\n%s", r.stderr)
	}
	recs := dirRecords(t, cj.dir)
	if len(recs) != 50 {
		t.Fatalf("%d records", len(recs))
	}
	for id, rec := range recs {
		if rec.TokenIDs != nil || !strings.HasPrefix(rec.TokenIDsMismatch, "0 token_ids, usage.completion_tokens ") {
			t.Errorf("id %s: ids %v, mismatch %q", id, rec.TokenIDs, rec.TokenIDsMismatch)
			break
		}
	}
	st := readStatus(t, cj.dir)
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "return_token_ids") || st.State != runfiles.StateDone {
		t.Errorf("status.json state %q warnings %q", st.State, st.Warnings)
	}

	// A server that answers ids: no warning.
	_, good := cliMock(t, nil)
	cj2 := cliJob{baseURL: good, data: cj.data, dir: filepath.Join(t.TempDir(), "out")}
	if r := cliRun(t, cj2.args("--generation.return_token_ids", "--dataset.limit", "25")...); r.err != nil || strings.Contains(r.stderr, "warning") {
		t.Errorf("a server with ids: err %v, stderr:\n%s", r.err, r.stderr)
	}
}

// TestRunRequireTokenIDs: with generation.require_token_ids the same
// server stops the run after its first answers: exit 1 with the fix as the
// hint, none of the answers it refused written (they are no done keys),
// status.json failed; against a server with ids the same command resumes
// and every record carries ids.
func TestRunRequireTokenIDs(t *testing.T) {
	t.Parallel()
	m, url := ignoringMock(t)
	cj := cliJob{baseURL: url, data: cliDataset(t, 200, 0), dir: filepath.Join(t.TempDir(), "out")}
	args := cj.args("--generation.return_token_ids", "--generation.require_token_ids", "--concurrency", "2")
	r := cliRun(t, args...)
	if code := exitCode(r.err); r.err == nil || code != exitFailure {
		t.Fatalf("exit %d (%v), want %d\nstderr:\n%s", code, r.err, exitFailure, r.stderr)
	}
	if !strings.Contains(r.err.Error(), "generation.require_token_ids") || !strings.Contains(r.hint(), "vLLM 0.10.2") {
		t.Errorf("error %q hint %q: want the finding and the fix", r.err, r.hint())
	}
	if got := m.Stats().Requests; got >= 200 || got < 20 {
		t.Errorf("%d requests: want the run stopped soon after 20 of 200", got)
	}
	if n := len(cliRecords(t, cj.dir)); n != 0 {
		t.Errorf("%d records kept, want none: an answer without the ids required is not done", n)
	}
	st := readStatus(t, cj.dir)
	if st.State != runfiles.StateFailed || len(st.Warnings) != 1 {
		t.Errorf("status.json state %q warnings %q, want failed with the warning", st.State, st.Warnings)
	}
	_, good := cliMock(t, nil)
	cj.baseURL = good
	cliRun(t, cj.args("--generation.return_token_ids", "--generation.require_token_ids")...).ok(t, "fixed server")
	wantIDs(t, "resumed", cliRecords(t, cj.dir), idRange(0, 200)...)
	for _, rec := range readAllRecords(t, cj.dir) {
		if rec.TokenIDs == nil {
			t.Errorf("id %s: resumed, a record without token ids", rec.ID)
		}
	}
}

// duckdbTokens is what testdata/duckdb_tokens.mjs prints.
type duckdbTokens struct {
	Rows []struct {
		ID             string         `json:"id"`
		PromptTokenIDs []int32        `json:"prompt_token_ids"`
		TokenIDs       []int32        `json:"token_ids"`
		Mismatch       string         `json:"token_ids_mismatch"`
		Logprobs       *sink.Logprobs `json:"logprobs"`
		Turns          []struct {
			PromptTokenIDs []int32        `json:"prompt_token_ids"`
			TokenIDs       []int32        `json:"token_ids"`
			Logprobs       *sink.Logprobs `json:"logprobs"`
		} `json:"turns"`
	} `json:"rows"`
	Turns         int `json:"turns"`
	TurnsAgreeing int `json:"turns_agreeing"`
}

// TestParquetTokensReadByDuckDB: DuckDB reads the token columns of a
// whole-conversation job's Parquet parts as parquet-go does, ids as
// INTEGER lists and logprobs as FLOAT lists, top-level and per turn; in
// SQL, every turn's len(token_ids) is its completion_tokens.
func TestParquetTokensReadByDuckDB(t *testing.T) {
	t.Parallel()
	modules, node := duckdbModules(t)
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: writeTurns(t, 30, 2), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args(append(tokenArgs(3), "--generation.turns", "all", "--output.format", "parquet")...)...).ok(t, "parquet")
	want := dirRecords(t, cj.dir)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "duckdb_tokens.mjs"), cj.dir)
	cmd.Env = append(childEnv(), "NODE_PATH="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckdb_tokens.mjs: %v\n%s", err, stderr.String())
	}
	var got duckdbTokens
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("duckdb_tokens.mjs output: %v: %.500s", err, stdout.String())
	}
	if len(got.Rows) != 30 || got.Turns != 60 || got.TurnsAgreeing != 60 {
		t.Fatalf("DuckDB: %d rows, %d turns, %d with as many ids as completion_tokens; want 30, 60, 60", len(got.Rows), got.Turns, got.TurnsAgreeing)
	}
	for _, row := range got.Rows {
		w := want[row.ID]
		emptyNil(row.Logprobs) // DuckDB's [] where parquet-go reads none
		for k := range row.Turns {
			emptyNil(row.Turns[k].Logprobs)
		}
		if !slices.Equal(row.PromptTokenIDs, w.PromptTokenIDs) || !slices.Equal(row.TokenIDs, w.TokenIDs) || row.Mismatch != "" || !reflect.DeepEqual(row.Logprobs, w.Logprobs) {
			t.Errorf("id %s: DuckDB reads\n%v %v %+v\nparquet-go\n%v %v %+v", row.ID, row.PromptTokenIDs, row.TokenIDs, row.Logprobs, w.PromptTokenIDs, w.TokenIDs, w.Logprobs)
			continue
		}
		for k, tn := range row.Turns {
			wt := w.Turns[k]
			if !slices.Equal(tn.PromptTokenIDs, wt.PromptTokenIDs) || !slices.Equal(tn.TokenIDs, wt.TokenIDs) || !reflect.DeepEqual(tn.Logprobs, wt.Logprobs) {
				t.Errorf("id %s turn %d: DuckDB and parquet-go differ", row.ID, k)
			}
		}
	}
}

// emptyNil makes l's empty lists nil, as the sink's reader gives them.
func emptyNil(l *sink.Logprobs) {
	if l != nil && len(l.TopTokens) == 0 {
		l.TopTokens = nil
	}
	if l != nil && len(l.TopIDs) == 0 {
		l.TopIDs = nil
	}
}

// TestChaosKill9TokenIDs: a job asking for ids and 20 logprobs is killed
// with SIGKILL again and again and resumed (chaos_test.go): in the end
// every record, streamed into Parquet or plain into JSONL, first turns and
// whole conversations, holds the mock's ids for its prompt and answer, as
// many as its completion_tokens, and their logprobs, each key once.
func TestChaosKill9TokenIDs(t *testing.T) {
	t.Parallel() // its own mocks, directories and processes
	seed := chaosSeed(t)
	t.Logf("chaos seed %d (replay: SYNTHGEN_TEST_CHAOS_SEED=%d go test -run TestChaosKill9TokenIDs ./cmd/synthgen)", seed, seed)
	synthgenBinary(t)
	prompts := 800
	if testing.Short() {
		prompts = 400
	}
	for i, c := range []struct {
		format string
		stream bool
		turns  int
	}{
		{"parquet", true, 1},
		{"jsonl", false, 1},
		{"parquet", true, 3},
	} {
		t.Run(fmt.Sprintf("%s/stream=%v/turns=%d", c.format, c.stream, c.turns), func(t *testing.T) {
			t.Parallel()
			check := func(r sink.Record, i int) {
				checkRecord(t, r, i, mockserver.DefaultModel)
				checkTokens(t, fmt.Sprint("record ", i), r.Messages, r.Reasoning, r.Content, r.CompletionTokens, r.PromptTokenIDs, r.TokenIDs, r.TokenIDsMismatch, r.Logprobs, 20)
			}
			if c.turns > 1 {
				check = func(r sink.Record, i int) {
					checkConversation(t, r, i, c.turns)
					checkTurnsTokens(t, fmt.Sprint("record ", i), r, c.turns, 20)
				}
			}
			// Whole conversations are three answers a record: half the rows
			// are still more than four kills at their longest can answer
			// (4 x 0.9 s x ~320 answers a second = 384 rows), and the rest,
			// each answer with 20 logprobs a token from the race-instrumented
			// mock, had made this the slowest case of the package.
			n := prompts
			if c.turns > 1 {
				n = prompts / 2
			}
			runChaos(t, chaosJob{turns: c.turns, seed: seed, cell: uint64(20 + i), format: c.format, stream: c.stream,
				prompts: n, kills: 4, maxDelay: 900 * time.Millisecond, extra: tokenArgs(20), check: check})
		})
	}
}
