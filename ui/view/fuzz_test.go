package view

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
)

// FuzzViewHistory: whatever history.jsonl holds (torn lines, other JSON,
// NaN-free numbers of any size), ReadHistory reads it without an error,
// and every series has one value per point.
func FuzzViewHistory(f *testing.F) {
	f.Add([]byte(`{"event":"status","state":"running","time":"2025-06-01T12:00:00Z","started_at":"2025-06-01T11:00:00Z","in_flight":3,"concurrency_auto":{"limit":4,"moves":1}}` + "\n"))
	f.Add([]byte(`{"time":"2025-06-01T12:00:00Z","server_down_since":"2025-06-01T11:59:00Z","endpoints":[{"url":"a","tok_per_s_10s":1}],"errors_by_cause":{"x":1}}` + "\n{\"time\":1}\n{"))
	f.Add([]byte("\x00\x00\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, runfiles.HistoryFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := ReadHistory(dir)
		if err != nil {
			t.Fatal(err)
		}
		check := func(name string, vals []num) {
			if len(vals) != s.Points {
				t.Fatalf("%s: %d values for %d points", name, len(vals), s.Points)
			}
		}
		if len(s.T) != s.Points {
			t.Fatalf("%d times for %d points", len(s.T), s.Points)
		}
		for name, vals := range s.Lines {
			check(name, vals)
		}
		for name, vals := range s.ErrorsByCause {
			check(name, vals)
		}
		for _, e := range s.Endpoints {
			check(e.URL, e.Tok)
			check(e.URL, e.Share)
		}
		points := 0
		for _, r := range s.Runs {
			points += r.Points
		}
		if points != s.Points {
			t.Fatalf("runs hold %d points of %d", points, s.Points)
		}
	})
}

// FuzzViewQuery: a records URL's query, whatever it holds, is refused
// with an error or selects without a panic.
func FuzzViewQuery(f *testing.F) {
	f.Add("truncated=1&min_tokens=5&max_tokens=9&sort=latency&desc=1&page=2&per=10")
	f.Add("dir=7&sort=x&q=%00")
	f.Add("finish=error%3A+http_400&errors=on&no_reasoning=1&think_tags=1")
	f.Add("tool_calls=1&diverged=on&sort=ttft")
	fx, _ := writeFixture(f, f.TempDir(), "jsonl", 40, 15, false)
	ix := built(f, fx.dir)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseQuery(v, 1)
		if err != nil {
			return
		}
		pos := ix.Select(q)
		if _, err := ix.Rows(pos[:min(len(pos), 5)]); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzViewTools: whatever a record's tools text and a call's arguments
// hold, the page's view of them keeps invalid arguments as sent and
// flagged, and valid ones the same JSON.
func FuzzViewTools(f *testing.F) {
	f.Add(toolsJSON, `{"city":"Paris"}`)
	f.Add(`[{"name":"x"},1,null]`, invalidArgs)
	f.Add(`{"function":{}}`, "\xff[")
	f.Fuzz(func(t *testing.T, tools, args string) {
		_ = toolsOf(tools)
		c := toolCallsOf([]chat.ToolCall{{ID: "a", Function: chat.ToolFunction{Arguments: args}}}, []chat.Message{{Role: "tool", ToolCallID: "a", Content: args}})
		if len(c) != 1 || len(c[0].Results) != 1 {
			t.Fatalf("calls %+v", c)
		}
		switch v := c[0]; {
		case v.Invalid != !json.Valid([]byte(args)):
			t.Fatalf("invalid = %v for %q", v.Invalid, args)
		case v.Invalid && v.Args != args:
			t.Fatalf("invalid arguments shown as %q, sent %q", v.Args, args)
		case !v.Invalid && !jsonEqual(v.Args, args):
			t.Fatalf("arguments %q shown as %q", args, v.Args)
		}
	})
}

// jsonEqual: a and b are the same JSON but for its white space.
func jsonEqual(a, b string) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, []byte(a)) == nil && json.Compact(&y, []byte(b)) == nil && x.String() == y.String()
}
