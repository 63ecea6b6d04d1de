package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// holdToolResult is the mock behind a gate: the first request that sends
// the cached result holdResult is held (arrived is closed) until its
// client goes away; every other request, and that one once open is
// closed, reaches the mock. It counts the requests sent per last turn.
type holdToolResult struct {
	mock       http.Handler
	holdResult string
	arrived    chan struct{}
	open       chan struct{}
	once       sync.Once
	mu         sync.Mutex
	asked      map[string]int // by the content of the request's last turn
}

func (h *holdToolResult) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Messages []chat.Message `json:"messages"`
	}
	if json.Unmarshal(body, &req) == nil && len(req.Messages) > 0 {
		last := req.Messages[len(req.Messages)-1].Content
		h.mu.Lock()
		h.asked[last]++
		h.mu.Unlock()
		if last == h.holdResult {
			select {
			case <-h.open:
			default:
				h.once.Do(func() { close(h.arrived) })
				select {
				case <-h.open:
				case <-r.Context().Done():
					return
				}
			}
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.mock.ServeHTTP(w, r)
}

// TestKill9MidToolConversation: a run of whole conversations with tools
// (generation.turns: all) is killed with SIGKILL while one conversation
// waits for the answer after its row's cached tool result; the resume asks
// that conversation whole again, and every row's record is on disk exactly
// once, whole: the target's own call, the row's cached result under the
// target's call id, and the target's answer to it.
func TestKill9MidToolConversation(t *testing.T) {
	t.Parallel()
	const rows, held = 12, 7
	h := &holdToolResult{mock: mockserver.New(mockserver.Options{MeanTokens: 8, Seed: 3}), holdResult: fmt.Sprintf("result %d", held),
		arrived: make(chan struct{}), open: make(chan struct{}), asked: map[string]int{}}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q %d"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"row-c","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},`+
			`{"role":"tool","tool_call_id":"row-c","content":"result %d"},{"role":"assistant","content":"the dataset's own answer"}],`+
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`+"\n", i, i)
	}
	data := filepath.Join(dir, "tools.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	args := []string{"run", "--dataset.path", data, "--endpoint.base_url", ts.URL + "/v1", "--output.dir", out, "--output.format", "jsonl",
		"--generation.turns", "all", "--generation.stream=true", "--concurrency", "2", "--quiet"}
	p := startSynthgen(t, "tools-killed", args...)
	select {
	case <-h.arrived:
	case <-p.done:
		t.Fatalf("the run ended before the held request; stderr:\n%s", p.stderr(t))
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	close(h.open)
	if code := startSynthgen(t, "tools-resumed", args...).wait(t, 60*time.Second); code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	recs := readRecords(t, out)
	seen := map[string]int{}
	for _, r := range recs {
		seen[r.ID]++
		checkToolConversation(t, r)
	}
	for i := range rows {
		if id := fmt.Sprint(i); seen[id] != 1 {
			t.Errorf("row %s on disk %d times, want once", id, seen[id])
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.asked[fmt.Sprintf("q %d", held)]; n != 2 {
		t.Errorf("the held row's first turn was asked %d times, want twice (before the kill, and whole on resume)", n)
	}
}

// checkToolConversation asserts that r is a tool row's conversation
// regenerated whole: the target's call, then the answer to the row's result.
func checkToolConversation(t *testing.T, r sink.Record) {
	t.Helper()
	if len(r.Turns) != 2 || len(r.Turns[0].ToolCalls) != 1 || r.Divergence != nil {
		t.Fatalf("record %s: turns %+v divergence %+v, want a call then an answer", r.ID, r.Turns, r.Divergence)
	}
	call := r.Turns[0].ToolCalls
	want := []chat.Message{{Role: "user", Content: "q " + r.ID}, {Role: "assistant", ToolCalls: call},
		{Role: "tool", Content: "result " + r.ID, ToolCallID: call[0].ID}}
	if !reflect.DeepEqual(r.Messages, want) || call[0].Function.Name != "get_weather" || call[0].ID == "" {
		t.Errorf("record %s sent\n%+v\nwant\n%+v", r.ID, r.Messages, want)
	}
	if r.Content != "The tool said: result "+r.ID || r.Turns[1].Content != r.Content {
		t.Errorf("record %s answered %q, want the answer to its cached result", r.ID, r.Content)
	}
}
