package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// TestToolCallsReadByDuckDB: a run of tool rows to Parquet, read by DuckDB:
// the answer's calls (a list of structs), the tools sent and the
// conversation's tool turn read as parquet-go reads them.
func TestToolCallsReadByDuckDB(t *testing.T) {
	t.Parallel()
	modules, node := duckdbModules(t)
	m := startMock(t, mockserver.Options{MeanTokens: 8, Seed: 6})
	dir := t.TempDir()
	rows := []string{
		`{"messages":[{"role":"user","content":"Q"}]}`,
		`{"messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`,
		`{"custom_id":"t","body":{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f"}}]}}`,
	}
	data := filepath.Join(dir, "tools.jsonl")
	if err := os.WriteFile(data, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	p := startSynthgen(t, "duckdb-tools", "run", "--dataset.path", data, "--endpoint.base_url", m.BaseURL,
		"--output.dir", out, "--output.format", "parquet", "--quiet")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr(t))
	}
	var recs = map[string]sink.Record{}
	parts, _ := filepath.Glob(filepath.Join(out, "data", "*.parquet"))
	for _, part := range parts {
		if err := sink.ForEachRecord(part, func(r *sink.Record, _ sink.Span) error { recs[r.ID] = *r; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"1", "t"} {
		want := recs[id]
		if id == "1" && (len(want.ToolCalls) != 1 || want.ToolCalls[0].Function.Arguments != `{"city": "city-value"}`) {
			t.Fatalf("record 1 holds calls %+v, want the mock's", want.ToolCalls)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "duckdb_check.mjs"), out, id)
		cmd.Env = append(childEnv(), "NODE_PATH="+modules)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("duckdb_check.mjs: %v\n%s", err, stderr.String())
		}
		var got duckdbAnswer
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Messages  []chat.Message  `json:"messages"`
			Tools     string          `json:"tools"`
			ToolCalls []chat.ToolCall `json:"tool_calls"`
		}
		raw, _ := json.Marshal(got.Record)
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatalf("DuckDB record: %v: %s", err, raw)
		}
		rec.Messages = turnsNilCalls(rec.Messages)
		if len(rec.ToolCalls) == 0 {
			rec.ToolCalls = nil
		}
		if !reflect.DeepEqual(rec.Messages, want.Messages) || rec.Tools != want.Tools || !reflect.DeepEqual(rec.ToolCalls, want.ToolCalls) {
			t.Errorf("DuckDB reads record %s as\n%s\nparquet-go reads\n%+v", id, raw, want)
		}
	}
}

// turnsNilCalls is ms with each turn's empty list of calls nil: Parquet
// readers give an empty list where the JSONL line has none.
func turnsNilCalls(ms []chat.Message) []chat.Message {
	out := append([]chat.Message(nil), ms...)
	for i := range out {
		if len(out[i].ToolCalls) == 0 {
			out[i].ToolCalls = nil
		}
	}
	return out
}
