package main

// End-to-end tests of the built binary as its user runs it: under nohup with
// stdout to a file, stopped with Ctrl-C, left running when its terminal
// closes, and its Parquet output read by another Parquet implementation.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/ui/progress"
)

// headerRe matches the line run prints once its signal handlers are set.
var headerRe = regexp.MustCompile(`(?m)^synthgen \S+: \d+ prompts from `)

// progressTextRe is the plain progress line's fixed head (progress.go).
var progressTextRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ progress (\d+)/(\d+) \((\d+\.\d)%\) \(\d+ errors, \d+ failed earlier\) [\d.]+ req/s \d+ tok/s avg completion (--|\d+) tok in flight \d+ eta \S+`)

// TestProgressLinesToFile is a job under nohup: stdout is a file, so
// progress is one plain line per progress.interval, with no carriage
// return and no terminal escape anywhere.
func TestProgressLinesToFile(t *testing.T) {
	t.Parallel()
	const (
		prompts  = 160
		inFlight = 16
		interval = 200 * time.Millisecond
	)
	// ~50 tokens at 4 ms: ~200 ms an answer, so 160 prompts at 16 in
	// flight take at least 2 s (Little's law), ten intervals.
	m := startMockProcess(t, "--token-delay", "4ms", "--mean-tokens", "50", "--seed", "3")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	p := startSynthgen(t, "progress", "run",
		"--dataset.path", writeShareGPT(t, dir, prompts),
		"--endpoint.base_url", m.BaseURL,
		"--output.dir", out,
		"--output.format", "jsonl",
		"--generation.max_tokens", "200",
		"--concurrency", strconv.Itoa(inFlight),
		"--progress.interval", interval.String(),
	)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr(t))
	}
	elapsed := p.ended.Sub(p.started)
	if elapsed < 1500*time.Millisecond {
		t.Fatalf("the run took %s; the test needs at least 1.5 s of progress to count lines", elapsed)
	}
	stdout, stderr := p.stdout(t), p.stderr(t)
	for name, text := range map[string]string{"stdout": stdout, "stderr": stderr} {
		if i := strings.IndexAny(text, "\r\x1b"); i >= 0 {
			t.Errorf("%s holds %q at byte %d (a bar or an escape sequence in a file): %q", name, text[i], i, text[max(0, i-40):min(len(text), i+40)])
		}
	}

	var lines []string
	last := int64(-1)
	for _, line := range strings.Split(stdout, "\n") {
		if !strings.Contains(line, "progress ") { // what `grep progress` keeps
			continue
		}
		mm := progressTextRe.FindStringSubmatch(line)
		if mm == nil {
			t.Errorf("progress line does not have the documented layout: %q", line)
			continue
		}
		done, _ := strconv.ParseInt(mm[1], 10, 64)
		if total := mm[2]; total != strconv.Itoa(prompts) {
			t.Errorf("progress line total %s, want %d: %q", total, prompts, line)
		}
		if pct := mm[3] + "%"; pct != progress.Percent(done, prompts) {
			t.Errorf("progress line says %s done, want %s: %q", pct, progress.Percent(done, prompts), line)
		}
		if done < last {
			t.Errorf("done went back from %d to %d: %q", last, done, line)
		}
		last = done
		lines = append(lines, line)
	}
	// The reporter starts after the dataset count and /v1/models and prints
	// once more at the end, so the count is at most the number of whole
	// intervals in the run plus two; more means a line per event. Start-up
	// (the test's clock runs from exec) and ticks a busy machine drops only
	// lower the count, by how much depends on the machine: fewer than half
	// means silent stretches in a log.
	whole := int(elapsed / interval)
	if len(lines) < whole/2-2 || len(lines) > whole+2 {
		t.Errorf("%d progress lines in %s at one per %s, want %d/2-2..%d+2:\n%s", len(lines), elapsed.Round(time.Millisecond), interval, whole, whole, strings.Join(lines, "\n"))
	}
	if last != prompts {
		t.Errorf("the last progress line counts %d done, want %d", last, prompts)
	}
	if !strings.Contains(stdout, "done 160/160 in ") {
		t.Errorf("no final summary \"done 160/160\" in stdout:\n%s", stdout)
	}
	checkComplete(t, out, prompts, mockserver.DefaultModel)
	t.Logf("%d progress lines in %s", len(lines), elapsed.Round(time.Millisecond))
}

// TestInterruptDrains is the first Ctrl-C: no new request starts, every
// request in flight finishes and is written, the exit code is 130, no
// temporary file is left; the rerun resumes without writing a key twice.
func TestInterruptDrains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format string
		stream bool
	}{
		{"jsonl", true},
		{"parquet", false},
	} {
		t.Run(tc.format+"/stream="+strconv.FormatBool(tc.stream), func(t *testing.T) {
			t.Parallel()
			const (
				prompts  = 150
				inFlight = 16
			)
			// ~320 ms an answer (long-tailed up to 1 s): the signal
			// always finds 16 requests in the middle of their answers.
			m := startMockProcess(t, "--token-delay", "5ms", "--ttft", "20ms", "--mean-tokens", "60", "--seed", "4")
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			args := []string{"run",
				"--dataset.path", writeShareGPT(t, dir, prompts),
				"--endpoint.base_url", m.BaseURL,
				"--output.dir", out,
				"--output.format", tc.format,
				"--generation.stream=" + strconv.FormatBool(tc.stream),
				"--generation.max_tokens", "200",
				"--output.shard_size", "20",
				"--concurrency", strconv.Itoa(inFlight),
				"--progress.interval", "100ms",
				"--log-format", "json",
				"--shutdown.grace", "30s",
			}
			p := startSynthgen(t, "interrupted", args...)
			waitProgress(t, p, 10*time.Second, func(l progressLine) bool { return l.Done >= 20 && l.InFlight == inFlight })
			before := m.stats(t)
			p.signal(t, syscall.SIGINT)
			// 130, as documented: scripts chain on it.
			if code := p.wait(t, 30*time.Second); code != 130 {
				t.Fatalf("exit %d after SIGINT, want 130; stderr:\n%s", code, p.stderr(t))
			}
			if !strings.Contains(p.stderr(t), "stopping: no new requests") {
				t.Errorf("stderr does not say it is draining:\n%s", p.stderr(t))
			}
			st := m.waitIdle(t)
			inv, err := readInventory(out)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case st.Aborted != 0:
				t.Errorf("the mock saw %d requests cut: a drain lets every request in flight finish", st.Aborted)
			case int64(len(inv.Records)) != st.Completed:
				t.Errorf("%d records on disk, the mock completed %d answers: every answer of a drain is written", len(inv.Records), st.Completed)
			case st.Requests > before.Requests+inFlight:
				t.Errorf("the mock got %d requests after SIGINT with %d in flight: a drain starts none", st.Requests-before.Requests, inFlight)
			case len(inv.Records) >= prompts:
				t.Errorf("all %d prompts done: the signal came too late to test a drain", prompts)
			}
			if len(inv.Temps) > 0 {
				t.Errorf("temporary files left after the drain: %v", inv.Temps)
			}
			lines := progressLines(t, p.stdout(t))
			if n := lines[len(lines)-1].Done; n != int64(len(inv.Records)) {
				t.Errorf("the last progress line counts %d done, %d are on disk", n, len(inv.Records))
			}
			drained := len(inv.Records)

			r := startSynthgen(t, "resumed", args...)
			if code := r.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("resume: exit %d; stderr:\n%s", code, r.stderr(t))
			}
			if n, ok := resumedCount(r.stderr(t)); !ok || n != drained {
				t.Errorf("resume found %d records (line present: %v), %d were on disk", n, ok, drained)
			}
			checkComplete(t, out, prompts, mockserver.DefaultModel)
			st = m.waitIdle(t)
			if st.Completed != prompts || st.Aborted != 0 {
				t.Errorf("mock: %d answers completed, %d cut for %d prompts: a drained key is asked once", st.Completed, st.Aborted, prompts)
			}
			t.Logf("SIGINT with %d in flight: %d records drained, exit 130; resume completed %d", inFlight, drained, prompts-drained)
		})
	}
}

// TestHangupIgnored is a job started under nohup or in a terminal that is
// then closed: SIGHUP must not stop it.
func TestHangupIgnored(t *testing.T) {
	t.Parallel()
	const prompts = 200
	m := startMockProcess(t, "--token-delay", "2ms", "--mean-tokens", "50", "--seed", "5")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	p := startSynthgen(t, "hangup", "run",
		"--dataset.path", writeShareGPT(t, dir, prompts),
		"--endpoint.base_url", m.BaseURL,
		"--output.dir", out,
		"--output.format", "parquet",
		"--generation.max_tokens", "200",
		"--concurrency", "16",
		"--progress.interval", "100ms",
		"--log-format", "json",
	)
	// Before its handlers are set a SIGHUP would kill any process: send
	// it once run has said it started.
	p.waitForOutput(t, true, headerRe, 10*time.Second)
	for range 3 {
		p.signal(t, syscall.SIGHUP)
		time.Sleep(50 * time.Millisecond)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGHUP, want 0 (SIGHUP is ignored); stderr:\n%s", code, p.stderr(t))
	}
	checkComplete(t, out, prompts, mockserver.DefaultModel)
}

// waitProgress waits until a JSON progress line satisfies ok.
func waitProgress(t *testing.T, p *proc, timeout time.Duration, ok func(progressLine) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, l := range progressLines(t, p.stdout(t)) {
			if ok(l) {
				return
			}
		}
		if p.exited() {
			t.Fatalf("process ended (%v) before the awaited progress; stdout:\n%s\nstderr:\n%s", p.waitErr, p.stdout(t), p.stderr(t))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no awaited progress line within %s; stdout:\n%s", timeout, p.stdout(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// duckdbModules returns the node_modules directory holding
// @duckdb/node-api and the node command. Without them the test is skipped
// on a developer's machine, and fails in CI (CI=true), where .ci/run
// installs them: an independent reader that silently never runs checks
// nothing.
func duckdbModules(t *testing.T) (modules, node string) {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("DuckDB check cannot run in CI: %s (.ci/run installs @duckdb/node-api and sets SYNTHGEN_TEST_DUCKDB_MODULES)", why)
		}
		t.Skipf("DuckDB check skipped: %s (set SYNTHGEN_TEST_DUCKDB_MODULES to a node_modules holding @duckdb/node-api)", why)
	}
	modules = os.Getenv("SYNTHGEN_TEST_DUCKDB_MODULES")
	if modules == "" {
		missing("SYNTHGEN_TEST_DUCKDB_MODULES is not set")
	}
	if !fileExists(filepath.Join(modules, "@duckdb", "node-api", "package.json")) {
		missing(modules + " holds no @duckdb/node-api")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("no node on PATH")
	}
	return modules, node
}

// duckdbAnswer is what testdata/duckdb_check.mjs prints.
type duckdbAnswer struct {
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows         int                        `json:"rows"`
	DistinctKeys int                        `json:"distinct_keys"`
	Record       map[string]json.RawMessage `json:"record"`
}

// TestParquetReadByDuckDB has DuckDB, a Parquet reader that shares no code
// with parquet-go, read synthgen's Parquet shards: the schema is the
// record's (lists in the standard LIST layout, so messages is a list of
// structs and not empty), every row is there once, and a record reads the
// same in both.
func TestParquetReadByDuckDB(t *testing.T) {
	t.Parallel()
	modules, node := duckdbModules(t)
	const prompts = 120
	// Priced, with cached prompt tokens: cost and cached_tokens are not 0.
	m := startMock(t, mockserver.Options{MeanTokens: 40, Seed: 6, CachedTokens: 4})
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	p := startSynthgen(t, "duckdb", "run",
		"--dataset.path", writeShareGPT(t, dir, prompts),
		"--endpoint.base_url", m.BaseURL,
		"--endpoint.price", `{"input":2.5,"output":10,"cached_input":1.25}`,
		"--output.dir", out,
		"--output.format", "parquet",
		"--output.shard_size", "50",
		"--concurrency", "16",
		"--quiet",
	)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr(t))
	}
	inv := checkComplete(t, out, prompts, mockserver.DefaultModel)
	if len(inv.Finals) != 3 {
		t.Errorf("%d shards, want 3 (120 records, 50 a shard): the test reads a glob of several files", len(inv.Finals))
	}

	const id = "7"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "duckdb_check.mjs"), out, id)
	cmd.Env = append(childEnv(), "NODE_PATH="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckdb_check.mjs: %v\n%s", err, stderr.String())
	}
	var got duckdbAnswer
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("duckdb_check.mjs output: %v: %s", err, stdout.String())
	}

	// The columns are the record's fields, in order, with the types a
	// user's SQL and pandas code will see.
	wantTypes := map[string]string{
		"id": "VARCHAR", "sample": "BIGINT", "source": "VARCHAR",
		"messages":  "STRUCT(role VARCHAR, content VARCHAR, tool_calls " + duckdbToolCalls + ", tool_call_id VARCHAR)[]",
		"reasoning": "VARCHAR", "content": "VARCHAR", "finish_reason": "VARCHAR", "model": "VARCHAR",
		"prompt_tokens": "BIGINT", "completion_tokens": "BIGINT",
		"latency_ms": "DOUBLE", "ttft_ms": "DOUBLE", "attempts": "BIGINT",
		"created_at": "TIMESTAMP", "cached_tokens": "BIGINT", "cost": "DOUBLE",
		// The tokens (empty lists and a null logprobs without them).
		"prompt_token_ids": "INTEGER[]", "token_ids": "INTEGER[]", "token_ids_mismatch": "VARCHAR",
		"logprobs": duckdbLogprobs,
		// A whole conversation's turns, nested (empty for a first-turn job).
		"turns": "STRUCT(reasoning VARCHAR, content VARCHAR, finish_reason VARCHAR, prompt_tokens BIGINT, completion_tokens BIGINT, " +
			"prompt_token_ids INTEGER[], token_ids INTEGER[], token_ids_mismatch VARCHAR, logprobs " + duckdbLogprobs +
			", tool_calls " + duckdbToolCalls + ", tool_calls_invalid BIGINT)[]",
		// The tools sent (JSON text), the answer's calls, those invalid.
		"tools": "VARCHAR", "tool_calls": duckdbToolCalls, "tool_calls_invalid": "BIGINT",
		// Where a tool conversation left its row (null when it did not).
		"divergence": "STRUCT(kind VARCHAR, turn BIGINT, detail VARCHAR)",
	}
	var names, gotNames []string
	rt := reflect.TypeFor[sink.Record]()
	for i := range rt.NumField() {
		names = append(names, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	for _, c := range got.Columns {
		gotNames = append(gotNames, c.Name)
		typ := strings.ReplaceAll(c.Type, `"`, "")
		want, ok := wantTypes[c.Name]
		switch {
		case !ok:
		case c.Name == "created_at":
			// TIMESTAMP or TIMESTAMP WITH TIME ZONE, as the UTC flag says.
			if !strings.HasPrefix(typ, want) {
				t.Errorf("column %s: DuckDB type %s, want %s...", c.Name, c.Type, want)
			}
		case typ != want:
			t.Errorf("column %s: DuckDB type %s, want %s", c.Name, c.Type, want)
		}
	}
	if !reflect.DeepEqual(gotNames, names) {
		t.Errorf("DuckDB columns %v, want the record's fields %v", gotNames, names)
	}
	t.Logf("DuckDB schema: %v", got.Columns)
	if got.Rows != prompts || got.DistinctKeys != prompts {
		t.Errorf("DuckDB reads %d rows, %d distinct keys; want %d of each", got.Rows, got.DistinctKeys, prompts)
	}

	// One record, field by field, as parquet-go read it.
	want := inv.Records[sink.Key{ID: id}]
	var rec struct {
		ID           string         `json:"id"`
		Sample       json.Number    `json:"sample"`
		Source       string         `json:"source"`
		Messages     []chat.Message `json:"messages"`
		Reasoning    string         `json:"reasoning"`
		Content      string         `json:"content"`
		FinishReason string         `json:"finish_reason"`
		Model        string         `json:"model"`
		Completion   json.Number    `json:"completion_tokens"`
		Cached       json.Number    `json:"cached_tokens"`
		Cost         float64        `json:"cost"`
		CreatedAt    string         `json:"created_at"`
	}
	raw, _ := json.Marshal(got.Record)
	dec := json.NewDecoder(bytes.NewReader(numbersUnquoted(raw)))
	dec.UseNumber()
	if err := dec.Decode(&rec); err != nil {
		t.Fatalf("DuckDB record: %v: %s", err, raw)
	}
	rec.Messages = turnsNilCalls(rec.Messages) // DuckDB's empty lists
	want.Messages = turnsNilCalls(want.Messages)
	if rec.ID != want.ID || rec.Sample.String() != "0" || rec.Source != want.Source ||
		!reflect.DeepEqual(rec.Messages, want.Messages) || rec.Reasoning != want.Reasoning ||
		rec.Content != want.Content || rec.FinishReason != want.FinishReason || rec.Model != want.Model ||
		rec.Completion.String() != strconv.Itoa(want.CompletionTokens) ||
		rec.Cached.String() != "4" || want.CachedTokens != 4 || want.Cost <= 0 || rec.Cost != want.Cost {
		t.Errorf("DuckDB reads record %s as\n%s\nparquet-go reads\n%+v", id, raw, want)
	}
	// DuckDB prints a timestamp as "2026-01-02 15:04:05.123+00" (with a
	// zone) or without one; the file stores milliseconds.
	at, err := time.Parse("2006-01-02 15:04:05.999999-07", rec.CreatedAt)
	if err != nil {
		at, err = time.Parse("2006-01-02 15:04:05.999999", rec.CreatedAt)
	}
	if err != nil || !at.Equal(want.CreatedAt.Truncate(time.Millisecond)) {
		t.Errorf("DuckDB created_at %q (%v), parquet-go %v", rec.CreatedAt, err, want.CreatedAt)
	}
}

// duckdbToolCalls is a list of tool calls as DuckDB types it.
const duckdbToolCalls = "STRUCT(id VARCHAR, type VARCHAR, function STRUCT(name VARCHAR, arguments VARCHAR))[]"

// duckdbLogprobs is the record's logprobs as DuckDB types them.
const duckdbLogprobs = "STRUCT(token_logprobs FLOAT[], top_ids INTEGER[][], top_tokens VARCHAR[][], top_logprobs FLOAT[][])"

// numbersUnquoted turns DuckDB's JSON strings of BIGINT values ("12")
// into JSON numbers, so both spellings decode into json.Number.
func numbersUnquoted(b []byte) []byte {
	return regexp.MustCompile(`"(sample|prompt_tokens|completion_tokens|cached_tokens|attempts)":"(-?\d+)"`).ReplaceAll(b, []byte(`"$1":$2`))
}
