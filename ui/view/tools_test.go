package view

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// The tool records' text: the hostile call's name and arguments are
// markup and script.
const (
	toolsJSON    = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"<script>alert(8)</script>"}}]`
	hostileTool  = `<script>alert(8)</script>`
	hostileArgs  = `{"q":"<img src=x onerror=alert(9)>"}`
	invalidArgs  = `{"city": "Par`
	weatherReply = `{"temp_c": 21, "sky": "clear"}`
)

// toolRecord is record i of the tools fixture: every third a whole
// conversation whose first turn called get_weather (answered by the
// row's cached result) and whose last answered in text; every sixth of
// those diverged at its last turn calling a tool the row does not offer;
// record 4 calls the hostile tool with invalid arguments besides; record
// 7 is one generation that called get_weather; the rest answer without
// tools.
func toolRecord(i int) sink.Record {
	r := fixtureRecord(i + 1000)
	if i%3 != 1 {
		return r
	}
	id := "call_" + strconv.Itoa(i)
	first := chat.ToolCall{ID: id, Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: `{"city":"Paris","days":2}`}}
	r.Tools = toolsJSON
	r.Messages = append(r.Messages,
		chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{first}},
		chat.Message{Role: "tool", ToolCallID: id, Content: weatherReply + " #" + strconv.Itoa(i)})
	last := sink.Turn{Content: "It is clear in Paris.", FinishReason: "stop", CompletionTokens: 9}
	if i%6 == 4 {
		last = sink.Turn{FinishReason: "tool_calls", CompletionTokens: 12, ToolCallsInvalid: 1, ToolCalls: []chat.ToolCall{
			{ID: "call_x", Type: "function", Function: chat.ToolFunction{Name: hostileTool, Arguments: hostileArgs}},
			{ID: "call_y", Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: invalidArgs}}}}
		r.Divergence = &sink.Divergence{Kind: sink.DivergedUnknownTool, Turn: 1, Detail: hostileTool}
	}
	if i == 7 { // one generation, not a whole conversation: its answer is the call
		r.Messages, r.Content, r.FinishReason, r.ToolCalls = r.Messages[:2], "", "tool_calls", []chat.ToolCall{first}
		return r
	}
	r.Turns = []sink.Turn{{FinishReason: "tool_calls", CompletionTokens: 14, ToolCalls: []chat.ToolCall{first}}, last}
	r.Content, r.FinishReason, r.ToolCalls, r.ToolCallsInvalid = last.Content, last.FinishReason, last.ToolCalls, last.ToolCallsInvalid
	return r
}

// toolsDir writes n tool records to a finished directory and serves it.
func toolsDir(t *testing.T, format string, n int) ([]sink.Record, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := sink.Open(sink.Options{Dir: dir, Format: format, PartSize: 7, Job: fixtureJob(t), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var recs []sink.Record
	for i := range n {
		r := toolRecord(i)
		if err := s.Write(&r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	srv, ts := serve(t, Options{Dirs: []string{dir}})
	if err := srv.Index().Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	return recs, ts.URL
}

// TestToolCallsOf: valid arguments pretty-printed, invalid ones kept as
// sent and flagged, each call with the results naming its id only.
func TestToolCallsOf(t *testing.T) {
	calls := []chat.ToolCall{
		{ID: "a", Function: chat.ToolFunction{Name: "f", Arguments: `{"x":1}`}},
		{ID: "b", Function: chat.ToolFunction{Name: "g", Arguments: invalidArgs}},
		{Function: chat.ToolFunction{Name: "h", Arguments: `{}`}},
	}
	msgs := []chat.Message{{Role: "tool", ToolCallID: "b", Content: "rb"}, {Role: "user", ToolCallID: "a", Content: "not a result"},
		{Role: "tool", ToolCallID: "a", Content: "ra"}, {Role: "tool", Content: "no id"}}
	got := toolCallsOf(calls, msgs)
	want := []callView{
		{ID: "a", Name: "f", Args: "{\n  \"x\": 1\n}", Results: []string{"ra"}},
		{ID: "b", Name: "g", Args: invalidArgs, Invalid: true, Results: []string{"rb"}},
		{Name: "h", Args: "{}"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d calls, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Name != w.Name || g.Args != w.Args || g.Invalid != w.Invalid || !slices.Equal(g.Results, w.Results) {
			t.Errorf("call %d = %+v, want %+v", i, g, w)
		}
	}
	if tv := toolsOf(toolsJSON); !slices.Equal(tv.Names, []string{"get_weather", hostileTool}) || !strings.Contains(tv.Text, "\n  {") {
		t.Errorf("toolsOf = %+v", tv)
	}
	if tv := toolsOf("not json"); len(tv.Names) != 0 || tv.Text != "not json" {
		t.Errorf("toolsOf(not json) = %+v", tv)
	}
}

// TestViewToolFilters: the index's tool-call and divergence flags select
// exactly the records that have them, in both formats, and the run page's
// counts of them are those records'.
func TestViewToolFilters(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		recs, base := toolsDir(t, format, 40)
		counts := map[string]int64{}
		for _, f := range []struct {
			param string
			has   func(*sink.Record) bool
		}{{"tool_calls", hasToolCalls}, {"diverged", func(r *sink.Record) bool { return r.Divergence != nil }}} {
			var want []string
			for i := range recs {
				if f.has(&recs[i]) {
					want = append(want, `<a href="`+strings.ReplaceAll(recordURL(recs[i].ID, 0, 0), "&", "&amp;")+`">`)
				}
			}
			counts[f.param] = int64(len(want))
			_, body := get(t, nil, base+"/records?per=500&"+f.param+"=1")
			if n := strings.Count(body, `<tr data-pos=`); n != len(want) || len(want) == 0 {
				t.Errorf("%s %s=1: %d rows, want %d", format, f.param, n, len(want))
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("%s %s=1: no row %s", format, f.param, w)
				}
			}
		}
		var d Dist
		if _, body := get(t, nil, base+"/api/dist"); json.Unmarshal([]byte(body), &d) != nil ||
			d.ToolCalls != counts["tool_calls"] || d.Diverged != counts["diverged"] {
			t.Errorf("%s: /api/dist counts %d records with tool calls and %d diverged, want %v: %s", format, d.ToolCalls, d.Diverged, counts, body)
		}
	}
}

// TestViewToolRecordEscaped: the hostile call's name, arguments and the
// divergence that names it reach the record page as text only.
func TestViewToolRecordEscaped(t *testing.T) {
	recs, base := toolsDir(t, sink.FormatJSONL, 5)
	resp, body := get(t, nil, base+recordURL(recs[4].ID, 0, 0))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if m := hostileMarkup.FindString(body); m != "" {
		t.Errorf("the record page holds %q unescaped", m)
	}
	for _, s := range []string{"&lt;script&gt;alert(8)&lt;/script&gt;", "arguments not valid JSON", "does not offer"} {
		if !strings.Contains(body, s) {
			t.Errorf("the record page lacks %q", s)
		}
	}
}

// TestViewBrowserToolRecord: a record's page in Chromium shows the
// target's call, its arguments pretty-printed and the row's result that
// followed it; the hostile record's call and divergence show as text,
// and the tool-calls filter shows only records with calls.
func TestViewBrowserToolRecord(t *testing.T) {
	b := newBrowser(t)
	recs, base := toolsDir(t, sink.FormatJSONL, 30)
	b.open(base+recordURL(recs[1].ID, 0, 0), false)
	if got := eval[string](b, `document.querySelector(".turn .call code.name").textContent`); got != "get_weather" {
		t.Errorf("the first turn's call names %q", got)
	}
	if got := eval[string](b, `document.querySelector(".turn .call pre.args").textContent`); got != "{\n  \"city\": \"Paris\",\n  \"days\": 2\n}" {
		t.Errorf("the call's arguments show as %q", got)
	}
	if got := eval[string](b, `document.querySelector(".turn .call .result pre").textContent`); got != weatherReply+" #1" {
		t.Errorf("the call's result shows as %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll("#divergence").length`); n != 0 {
		t.Errorf("a record that followed its row shows a divergence")
	}
	b.open(base+recordURL(recs[7].ID, 0, 0), false)
	if got := eval[[]string](b, `[...document.querySelectorAll(".call code.name")].map(e => e.textContent)`); !slices.Equal(got, []string{"get_weather"}) || eval[int](b, `document.querySelectorAll(".turn, .call .result").length`) != 0 {
		t.Errorf("the one-generation record's answer shows calls %q (want get_weather, no turns, no result)", got)
	}
	b.open(base+recordURL(recs[4].ID, 0, 0), false)
	names := eval[[]string](b, `[...document.querySelectorAll(".turn .call code.name")].map(e => e.textContent)`)
	if !slices.Equal(names, []string{"get_weather", hostileTool, "get_weather"}) {
		t.Errorf("the turns' calls name %q", names)
	}
	if got := eval[string](b, `[...document.querySelectorAll(".turn .call pre.args")][2].textContent`); got != invalidArgs {
		t.Errorf("the invalid arguments show as %q, want them as sent", got)
	}
	if n := eval[int](b, `document.querySelectorAll(".call .invalid").length`); n != 1 {
		t.Errorf("%d calls flagged invalid, want 1", n)
	}
	if got := eval[string](b, `document.getElementById("divergence").textContent`); !strings.Contains(got, "At turn 2 the target called a tool the row does not offer: "+hostileTool) {
		t.Errorf("the divergence says %q", got)
	}
	for _, expr := range []string{`document.images.length`, `document.scripts.length`} {
		if n := eval[int](b, expr); n != 0 {
			t.Errorf("%s = %d: the call's markup became elements", expr, n)
		}
	}
	b.screenshot("tool-record.png")

	b.open(base+"/records?per=500", false)
	b.filterBy("tool_calls")
	ids := eval[[]string](b, `[...document.querySelectorAll("#records tbody tr td.id a")].map(a => a.textContent)`)
	marks := eval[int](b, `document.querySelectorAll("#records tbody tr td.id .mark.tools").length`)
	var want []string
	for _, r := range recs {
		if hasToolCalls(&r) {
			want = append(want, r.ID)
		}
	}
	if !slices.Equal(ids, want) || marks != len(want) {
		t.Errorf("the tool-calls filter shows %v (%d marked), want %v", ids, marks, want)
	}
	preview := eval[string](b, `[...document.querySelectorAll("#records tbody tr")].find(tr => tr.querySelector("td.id a").textContent === "`+recs[4].ID+`").querySelector("td.answer div").textContent`)
	if want := "(tool call) " + hostileTool + "(" + hostileArgs + "); get_weather(" + invalidArgs + ")"; preview != want {
		t.Errorf("the diverged record's answer previews as %q, want %q", preview, want)
	}
	if q := eval[string](b, `location.search`); !strings.Contains(q, "tool_calls=1") {
		t.Errorf("the form went to %s", q)
	}
	b.quiet()
}
