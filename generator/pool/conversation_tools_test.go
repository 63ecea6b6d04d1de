package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// scripted is one answer of a scriptedServer: calls (name, arguments) or
// text.
type scripted struct {
	calls [][2]string
	text  string
}

// scriptedServer answers the n-th chat request with script[n], in vLLM's
// exact tool-call shapes (a tool parser on): streamed, a first delta of a
// call with its index, id, type and name, then its arguments in fragments,
// and finish_reason tool_calls; plain, the message's tool_calls with
// content null. It keeps every request body it was sent.
type scriptedServer struct {
	mu     sync.Mutex
	script []scripted
	bodies []chatBody
}

type chatBody struct {
	Messages   []chat.Message  `json:"messages"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice string          `json:"tool_choice"`
	Stream     bool            `json:"stream"`
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body chatBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	if n >= len(s.script) {
		http.Error(w, "script ended", http.StatusBadRequest)
		return
	}
	a := s.script[n]
	finish := "stop"
	if len(a.calls) > 0 {
		finish = "tool_calls"
	}
	usage := `"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	if !body.Stream {
		var calls []map[string]any
		for i, c := range a.calls {
			calls = append(calls, map[string]any{"id": fmt.Sprintf("chatcmpl-tool-%d-%d", n, i), "type": "function",
				"function": map[string]any{"name": c[0], "arguments": c[1]}})
		}
		msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
		if len(calls) == 0 {
			msg = map[string]any{"role": "assistant", "content": a.text, "tool_calls": []any{}}
		}
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "%s,%s}", b[:len(b)-1], usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta string, fin string) {
		f := "null"
		if fin != "" {
			f = `"` + fin + `"`
		}
		fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`+"\n\n", delta, f)
	}
	chunk(`{"role":"assistant","content":""}`, "")
	for i, c := range a.calls {
		chunk(fmt.Sprintf(`{"tool_calls":[{"id":"chatcmpl-tool-%d-%d","type":"function","index":%d,"function":{"name":%q}}]}`, n, i, i, c[0]), "")
		for args := c[1]; args != ""; {
			frag := args[:min(len(args), 4)]
			args = args[len(frag):]
			q, _ := json.Marshal(frag)
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, q), "")
		}
	}
	if a.text != "" {
		q, _ := json.Marshal(a.text)
		chunk(`{"content":`+string(q)+`}`, "")
	}
	chunk(`{"content":""}`, finish)
	fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[],%s}`+"\n\n", usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

const scriptedTools = `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"function","function":{"name":"g"}}]`

func rowCall(name string) chat.Message {
	return chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "row-" + name, Type: "function", Function: chat.ToolFunction{Name: name, Arguments: "{}"}}}}
}

// runScripted runs one row's whole conversation against a scriptedServer
// and returns its record and the requests the server saw.
func runScripted(t *testing.T, stream bool, conv []chat.Message, script []scripted) (sink.Record, []chatBody) {
	t.Helper()
	srv := &scriptedServer{script: script}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	opts := wholeOptions()
	opts.Concurrency, opts.Stream = 1, stream
	eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 1}), runstats.NewStats(nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	src := &conversationSource{rows: []dataset.Prompt{{ID: "r", Messages: conv[:1], Conversation: conv, Tools: scriptedTools}}}
	if _, err := eng.Run(context.Background(), src, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	rec, ok := recordsByID(t, dir)["r"]
	if !ok {
		t.Fatalf("no record; the server saw %d requests", len(srv.bodies))
	}
	for i, b := range srv.bodies {
		if string(b.Tools) != scriptedTools || b.ToolChoice != "auto" {
			t.Errorf("request %d: tools %s tool_choice %q, want the row's tools and auto", i, b.Tools, b.ToolChoice)
		}
	}
	return rec, srv.bodies
}

func bothShapes(t *testing.T, f func(t *testing.T, stream bool)) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) { f(t, stream) })
	}
}

// TestToolConversationFollowsRow: over two segments the target's calls are
// each followed by the segment's next cached result, sent with the target's
// own call id and its call exactly as sent (arguments not JSON included),
// until it answers; the record holds every generation.
func TestToolConversationFollowsRow(t *testing.T) {
	bothShapes(t, func(t *testing.T, stream bool) {
		conv := []chat.Message{
			{Role: "user", Content: "Q1"},
			rowCall("f"), {Role: "tool", Content: "r1", ToolCallID: "row-f"},
			rowCall("f"), {Role: "tool", Content: "r2", ToolCallID: "row-f"},
			{Role: "assistant"},
			{Role: "user", Content: "Q2"},
			rowCall("g"), {Role: "tool", Content: "r3", ToolCallID: "row-g"},
			{Role: "assistant"},
		}
		script := []scripted{
			{calls: [][2]string{{"f", `{"city": "Paris"}`}}},
			{calls: [][2]string{{"f", `{"city": "Par`}}},
			{text: "T1"},
			{calls: [][2]string{{"g", `{}`}}},
			{text: "T2"},
		}
		rec, bodies := runScripted(t, stream, conv, script)
		if len(bodies) != 5 {
			t.Fatalf("%d requests, want 5", len(bodies))
		}
		call := func(n int, name, args string) chat.Message {
			return chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("chatcmpl-tool-%d-0", n), Type: "function", Function: chat.ToolFunction{Name: name, Arguments: args}}}}
		}
		result := func(n int, content string) chat.Message {
			return chat.Message{Role: "tool", Content: content, ToolCallID: fmt.Sprintf("chatcmpl-tool-%d-0", n)}
		}
		want := []chat.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "Q1"},
			call(0, "f", `{"city": "Paris"}`), result(0, "r1"), call(1, "f", `{"city": "Par`), result(1, "r2"),
			{Role: "assistant", Content: "T1"}, {Role: "user", Content: "Q2"}, call(3, "g", "{}"), result(3, "r3")}
		for i, n := range []int{2, 4, 6, 8, 10} {
			if !reflect.DeepEqual(bodies[i].Messages, want[:n]) {
				t.Errorf("request %d sent\n%+v\nwant\n%+v", i, bodies[i].Messages, want[:n])
			}
		}
		if !reflect.DeepEqual(rec.Messages, want) || rec.Content != "T2" || rec.Divergence != nil || len(rec.ToolCalls) != 0 {
			t.Errorf("record messages %+v content %q divergence %+v calls %v", rec.Messages, rec.Content, rec.Divergence, rec.ToolCalls)
		}
		if len(rec.Turns) != 5 || rec.ToolCallsInvalid != 1 || rec.Turns[1].ToolCallsInvalid != 1 || rec.Turns[0].ToolCallsInvalid != 0 {
			t.Fatalf("%d turns, invalid %d, want 5 turns and 1 invalid call (turn 1's)", len(rec.Turns), rec.ToolCallsInvalid)
		}
		for i, tn := range rec.Turns {
			if got := len(tn.ToolCalls) > 0; got != (script[i].text == "") || (got && tn.FinishReason != "tool_calls") {
				t.Errorf("turn %d: calls %v finish %s, want the script's %+v", i, tn.ToolCalls, tn.FinishReason, script[i])
			}
		}
	})
}

// TestToolConversationDiverges: each way the target leaves the row ends the
// conversation at that answer, the record written and saying how.
func TestToolConversationDiverges(t *testing.T) {
	oneCall := []chat.Message{{Role: "user", Content: "Q"}, rowCall("f"), {Role: "tool", Content: "r1"}, {Role: "assistant"}}
	for _, tt := range []struct {
		name   string
		script []scripted
		kind   string
		turn   int
		detail string
	}{
		{"parallel", []scripted{{calls: [][2]string{{"f", "{}"}, {"g", "{}"}}}}, sink.DivergedParallelCalls, 0, "2 calls"},
		{"unknown tool", []scripted{{calls: [][2]string{{"h", "{}"}}}}, sink.DivergedUnknownTool, 0, "h"},
		{"more calls", []scripted{{calls: [][2]string{{"f", "{}"}}}, {calls: [][2]string{{"g", "{}"}}}}, sink.DivergedMoreCalls, 1, "g"},
		{"answer for a call", []scripted{{text: "no need"}}, sink.DivergedAnswerForCall, 0, "the row called f"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bothShapes(t, func(t *testing.T, stream bool) {
				rec, bodies := runScripted(t, stream, oneCall, tt.script)
				want := sink.Divergence{Kind: tt.kind, Turn: tt.turn, Detail: tt.detail}
				if rec.Divergence == nil || *rec.Divergence != want {
					t.Fatalf("divergence %+v, want %+v", rec.Divergence, want)
				}
				if len(bodies) != len(tt.script) || len(rec.Turns) != len(tt.script) {
					t.Errorf("%d requests, %d turns, want %d: the conversation ends at the divergent answer", len(bodies), len(rec.Turns), len(tt.script))
				}
				last := tt.script[len(tt.script)-1]
				if len(rec.ToolCalls) != len(last.calls) || !reflect.DeepEqual(rec.Messages, bodies[len(bodies)-1].Messages) {
					t.Errorf("record calls %v messages %+v, want the last answer's and the last request's", rec.ToolCalls, rec.Messages)
				}
				if strings.Contains(fmt.Sprint(rec.Messages), "no need") {
					t.Errorf("the divergent answer was sent on: %+v", rec.Messages)
				}
			})
		})
	}
}
