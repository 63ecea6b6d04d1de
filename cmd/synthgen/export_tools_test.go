package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// toolConversationDir is an output directory of one whole conversation
// with tools, as the engine writes it with generation.turns: all and
// return_token_ids: a call, its cached result, a second call, its result,
// the answer; each generation with its prompt and generated ids.
func toolConversationDir(t *testing.T) string {
	t.Helper()
	j := job.Job{Selection: dataset.Selection{Path: inspectDataset(t, 1), Format: "auto"}, Sampling: job.Sampling{Model: "m", Samples: 1}}
	spec, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	s, err := sink.Open(sink.Options{Dir: dir, Format: sink.FormatJSONL, PartSize: 4, Job: sink.JobRecord{Version: "test", Spec: spec, Hash: j.Hash()}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id, name, args string) []chat.ToolCall {
		return []chat.ToolCall{{ID: id, Type: "function", Function: chat.ToolFunction{Name: name, Arguments: args}}}
	}
	c0, c1 := call("call_0", "get_weather", `{"city": "Paris"}`), call("call_1", "get_time", `{}`)
	turns := []sink.Turn{
		{Reasoning: "Weather first.", FinishReason: "tool_calls", PromptTokenIDs: []int32{1, 2}, TokenIDs: []int32{10, 11, 12}, ToolCalls: c0},
		{FinishReason: "tool_calls", PromptTokenIDs: []int32{1, 2, 10, 11, 12, 50}, TokenIDs: []int32{20, 21}, ToolCalls: c1},
		{Content: "Clear at noon.", FinishReason: "stop", PromptTokenIDs: []int32{1, 2, 10, 11, 12, 50, 20, 21, 51}, TokenIDs: []int32{30}},
	}
	last := turns[2]
	rec := &sink.Record{ID: "0", Model: "m", Attempts: 1, CreatedAt: time.UnixMilli(1_700_000_000_000).UTC(),
		Messages: []chat.Message{{Role: "user", Content: "question 0"}, {Role: "assistant", ToolCalls: c0},
			{Role: "tool", Content: `{"sky": "clear"}`, ToolCallID: "call_0"}, {Role: "assistant", ToolCalls: c1},
			{Role: "tool", Content: "12:00", ToolCallID: "call_1"}},
		Content: last.Content, FinishReason: last.FinishReason, PromptTokenIDs: last.PromptTokenIDs, TokenIDs: last.TokenIDs, Turns: turns,
		Tools: `[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}]`}
	if err := s.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// prune drops what a JSONL line omits and a Parquet row holds empty (null,
// "", an empty list), so the two read alike.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e = prune(e); e != nil {
				out[k] = e
			}
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i := range x {
			x[i] = prune(x[i])
		}
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}

// TestToolExportsReadByDuckDB: the specforge, sharegpt and speculators
// exports of a conversation with tools, written as Parquet and read by
// DuckDB (no code shared with parquet-go), hold what their JSONL holds:
// the calls, the results, the tools, and for speculators one row per
// generation with its ids and mask.
func TestToolExportsReadByDuckDB(t *testing.T) {
	t.Parallel()
	modules, node := duckdbModules(t)
	dir := toolConversationDir(t)
	fields := map[string][]string{
		"specforge":   {"id", "conversations", "tools", "status"},
		"sharegpt":    {"id", "conversations", "tools"},
		"speculators": {"id", "primary_id", "input_ids", "loss_mask", "conversations"},
	}
	for format, keys := range fields {
		tmp := t.TempDir()
		jsonl, pq := filepath.Join(tmp, "x.jsonl"), filepath.Join(tmp, "x.parquet")
		cliRun(t, "export", dir, "--format", format, "--out", jsonl).ok(t, "export "+format)
		cliRun(t, "export", dir, "--format", format, "--out", pq).ok(t, "export "+format+" parquet")
		stdout := duckdbExport(t, modules, node, pq)
		var got struct {
			Rows  int
			IDs   []string
			First map[string]any
		}
		if err := json.Unmarshal(stdout, &got); err != nil {
			t.Fatalf("%s: %v: %s", format, err, stdout)
		}
		data, err := os.ReadFile(jsonl)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
		var first map[string]any
		if err := json.Unmarshal(lines[0], &first); err != nil {
			t.Fatal(err)
		}
		if ids := exportIDs(t, jsonl, "id"); !reflect.DeepEqual(got.IDs, ids) || got.Rows != len(lines) {
			t.Errorf("%s: DuckDB reads %d rows %v, the JSONL %v", format, got.Rows, got.IDs, ids)
		}
		for _, k := range keys {
			if g, w := prune(got.First[k]), prune(first[k]); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %s as DuckDB reads it\n%v\nthe JSONL's\n%v", format, k, g, w)
			}
		}
	}
}

// duckdbExport is what testdata/duckdb_export.mjs prints of the Parquet
// files glob names.
func duckdbExport(t *testing.T, modules, node, glob string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "duckdb_export.mjs"), glob)
	cmd.Env = append(childEnv(), "NODE_PATH="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckdb_export.mjs %s: %v\n%s", glob, err, stderr.String())
	}
	return stdout.Bytes()
}
