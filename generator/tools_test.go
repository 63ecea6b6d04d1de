package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// toolRows are a dataset of tool rows: OpenAI's messages with a tools
// list (one as xlam's JSON text), a batch row whose last turn is a tool's
// result, a tool whose arguments the model gets wrong, and a bad row.
const toolRows = `{"id":"w","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"18C"},{"role":"assistant","content":"18C."}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather <now>","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}]}
{"id":"x","messages":[{"role":"user","content":"Sum 2 and 3"}],"tools":"[{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}}}}]"}
{"id":"b","messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"broken_weather"}}]}
{"id":"r","messages":[{"role":"system","content":"s"},{"role":"user","content":"Q"},{"role":"tool","tool_call_id":"c9","content":"the result of the tool, which is long enough to be cut at forty characters"}],"tools":[{"type":"function","function":{"name":"f"}}]}
{"id":"bad","messages":[{"role":"user","content":"Q"}],"tools":[{"type":"function","function":{"description":"no name"}}]}
`

// TestToolRowsRunAgainstTheMock: tool rows through a real run, streamed
// and plain: each request carries the row's tools (and tool_choice auto)
// and tool turns as the row had them; each record holds the mock's call
// byte for byte, its reasoning, finish_reason tool_calls, the tools sent,
// invalid arguments counted; the malformed row is a bad row named by line.
func TestToolRowsRunAgainstTheMock(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "plain"}[stream], func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var bodies []map[string]any
			var raws [][]byte
			mock := mockserver.New(mockserver.Options{MeanTokens: 4, Seed: 1})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/chat/completions" {
					b, _ := io.ReadAll(r.Body)
					var m map[string]any
					if err := json.Unmarshal(b, &m); err != nil {
						t.Errorf("request body: %v", err)
					}
					mu.Lock()
					bodies, raws = append(bodies, m), append(raws, b)
					mu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				mock.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			dir := t.TempDir()
			data := filepath.Join(dir, "data.jsonl")
			if err := os.WriteFile(data, []byte(toolRows), 0o644); err != nil {
				t.Fatal(err)
			}
			var skipped []*dataset.RowError
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stats := runstats.NewStats(nil)
			out := filepath.Join(dir, "out")
			r, err := Open(ctx, Setup{
				Stats: stats,
				Job: job.Job{
					Selection: dataset.Selection{Path: data, Format: "messages", IDField: "id"},
					Sampling:  job.Sampling{Model: mockserver.DefaultModel, MaxTokens: 64, Samples: 1},
				},
				BaseURL: ts.URL + "/v1", Concurrency: 2, Stream: stream,
				Retry: pool.RetryPolicy{MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
				Dir:   out, Format: "jsonl", PartSize: 100, SyncInterval: 10 * time.Millisecond,
				Version: "test", OnBadRow: "skip",
				OnSkip: func(e *dataset.RowError) { mu.Lock(); skipped = append(skipped, e); mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, Hooks{Final: func() runstats.ProgressRecord { return runstats.NewProgressRecord(stats.Snapshot(), nil) }}); err != nil {
				t.Fatal(err)
			}
			if len(skipped) != 1 || skipped[0].Error() != data+":5: tools[0].function.name: missing" {
				t.Errorf("skipped %v, want the row of line 5 named", skipped)
			}
			recs := map[string]sink.Record{}
			parts, _ := filepath.Glob(filepath.Join(out, "data", "*.jsonl"))
			for _, p := range parts {
				if err := sink.ForEachRecord(p, func(rec *sink.Record, _ sink.Span) error { recs[rec.ID] = *rec; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if len(recs) != 4 {
				t.Fatalf("%d records %v, want 4", len(recs), recs)
			}
			call := func(rec sink.Record, name, args string) {
				t.Helper()
				if len(rec.ToolCalls) != 1 || rec.FinishReason != "tool_calls" {
					t.Fatalf("record %s: calls %+v, finish %q; want one call, tool_calls", rec.ID, rec.ToolCalls, rec.FinishReason)
				}
				c := rec.ToolCalls[0]
				if c.Function.Name != name || c.Function.Arguments != args || c.Type != "function" || !strings.HasPrefix(c.ID, "chatcmpl-tool-") {
					t.Errorf("record %s: call %+v, want %s(%s)", rec.ID, c, name, args)
				}
				if rec.Reasoning != "A tool answers this." {
					t.Errorf("record %s: reasoning %q kept beside the call", rec.ID, rec.Reasoning)
				}
			}
			call(recs["w"], "get_weather", `{"city": "city-value", "days": 1}`)
			call(recs["x"], "add", `{"a": 1, "b": 1}`)
			call(recs["b"], "broken_weather", `{"city": "Par`)
			for id, invalid := range map[string]int{"w": 0, "x": 0, "b": 1} {
				if recs[id].ToolCallsInvalid != invalid {
					t.Errorf("record %s: tool_calls_invalid %d, want %d", id, recs[id].ToolCallsInvalid, invalid)
				}
			}
			res := recs["r"]
			if res.Content != "The tool said: the result of the tool, which is long en" || res.FinishReason != "stop" || res.ToolCalls != nil {
				t.Errorf("record r: content %q, finish %q, calls %v: the tool's result was not sent", res.Content, res.FinishReason, res.ToolCalls)
			}
			wantMsgs := []chat.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "Q"},
				{Role: "tool", Content: "the result of the tool, which is long enough to be cut at forty characters", ToolCallID: "c9"}}
			if !reflect.DeepEqual(res.Messages, wantMsgs) {
				t.Errorf("record r: messages %+v, want %+v", res.Messages, wantMsgs)
			}
			wantTools := `[{"function":{"description":"Weather <now>","name":"get_weather","parameters":{"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"type":"object"}},"type":"function"}]`
			if recs["w"].Tools != wantTools {
				t.Errorf("record w: tools %s, want %s", recs["w"].Tools, wantTools)
			}
			a, err := audit.Dir(out)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if want := (audit.ToolCounts{ToolCallRecords: 3, ToolCalls: 3, InvalidToolCalls: 1}); !reflect.DeepEqual(a.ToolCounts, want) {
				t.Errorf("inspect counts %+v, want %+v", a.ToolCounts, want)
			}
			if len(bodies) != 4 {
				t.Fatalf("%d requests, want 4", len(bodies))
			}
			for i, b := range bodies {
				msgs := b["messages"].([]any)
				first := msgs[len(msgs)-1].(map[string]any)
				if first["content"] == "Weather in Paris?" {
					if sent := `"tools":` + wantTools + `,"tool_choice":"auto"`; !bytes.Contains(raws[i], []byte(sent)) || len(msgs) != 1 {
						t.Errorf("request for w: %s\nwant %s and one message", raws[i], sent)
					}
				}
				if first["role"] == "tool" && first["tool_call_id"] != "c9" {
					t.Errorf("the tool turn went without its tool_call_id: %v", first)
				}
			}
		})
	}
}
