package mockserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// start runs a Server behind a real loopback HTTP server for the test.
func start(t testing.TB, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func userMessages(text string) []map[string]string {
	return []map[string]string{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": text},
	}
}

// post sends a chat completion request built from body.
func post(t testing.TB, ctx context.Context, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// answer is what a client takes from an answer, plain or streamed.
type answer struct {
	Reasoning, Content, Finish string
	Prompt, Completion         int
	Chunks                     int // token chunks, streaming only
}

func decodeMap(t testing.TB, r io.Reader) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m
}

func keys(m any) []string {
	mm, ok := m.(map[string]any)
	if !ok {
		return nil
	}
	return slices.Sorted(maps.Keys(mm))
}

func num(t testing.TB, v any) int {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("want a number, got %T %v", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return int(i)
}

func plain(t testing.TB, url string, body map[string]any) (answer, map[string]any) {
	t.Helper()
	resp := post(t, context.Background(), url, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	m := decodeMap(t, resp.Body)
	choice := m["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	usage := m["usage"].(map[string]any)
	a := answer{Finish: choice["finish_reason"].(string), Prompt: num(t, usage["prompt_tokens"]), Completion: num(t, usage["completion_tokens"])}
	a.Content, _ = msg["content"].(string)
	if r, ok := msg["reasoning"].(string); ok {
		a.Reasoning = r
	} else if r, ok := msg["reasoning_content"].(string); ok {
		a.Reasoning = r
	}
	return a, m
}

// stream reads a streamed answer, checking the SSE framing and vLLM's chunk
// shape on every line, and returns what a client assembles from it.
func stream(t testing.TB, url string, body map[string]any, field string, includeUsage bool) answer {
	t.Helper()
	body = maps.Clone(body)
	body["stream"] = true
	if includeUsage {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	resp := post(t, context.Background(), url, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type = %q", ct)
	}
	var (
		a                   answer
		reasoning, content  strings.Builder
		id                  string
		sawContent, sawDone bool
		sawUsage            bool
		finishes            int
		line                int
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" {
			continue
		}
		if sawDone {
			t.Fatalf("line %d after [DONE]: %q", line, text)
		}
		data, ok := strings.CutPrefix(text, "data: ")
		if !ok {
			t.Fatalf("line %d: not an SSE data line: %q", line, text)
		}
		if data == "[DONE]" {
			sawDone = true
			continue
		}
		chunk := decodeMap(t, strings.NewReader(data))
		if got, want := keys(chunk), []string{"choices", "created", "id", "model", "object"}; !slices.Equal(got, want) && !sawUsageKeys(got) {
			t.Fatalf("line %d: chunk keys %v, want %v (+usage on the usage chunk)", line, got, want)
		}
		if chunk["object"] != "chat.completion.chunk" {
			t.Fatalf("line %d: object %v", line, chunk["object"])
		}
		if id == "" {
			id = chunk["id"].(string)
		} else if chunk["id"] != id {
			t.Fatalf("line %d: id %v, want %v for every chunk", line, chunk["id"], id)
		}
		choices := chunk["choices"].([]any)
		if u, ok := chunk["usage"]; ok {
			if len(choices) != 0 || !includeUsage {
				t.Fatalf("line %d: usage on a chunk with choices or unasked: %s", line, data)
			}
			usage := u.(map[string]any)
			if got := keys(usage); !slices.Equal(got, []string{"completion_tokens", "prompt_tokens", "total_tokens"}) {
				t.Errorf("usage keys %v", got)
			}
			a.Prompt, a.Completion = num(t, usage["prompt_tokens"]), num(t, usage["completion_tokens"])
			if num(t, usage["total_tokens"]) != a.Prompt+a.Completion {
				t.Errorf("total_tokens %v != prompt+completion", usage["total_tokens"])
			}
			sawUsage = true
			continue
		}
		if len(choices) != 1 {
			t.Fatalf("line %d: %d choices", line, len(choices))
		}
		if finishes > 0 {
			t.Fatalf("line %d: a choice chunk after the finish_reason", line)
		}
		choice := choices[0].(map[string]any)
		wantKeys := []string{"delta", "finish_reason", "index", "logprobs"}
		if choice["finish_reason"] != nil {
			wantKeys = []string{"delta", "finish_reason", "index", "logprobs", "stop_reason"}
			a.Finish = choice["finish_reason"].(string)
			finishes++
		}
		if got := keys(choice); !slices.Equal(got, wantKeys) {
			t.Fatalf("line %d: choice keys %v, want %v", line, got, wantKeys)
		}
		delta := choice["delta"].(map[string]any)
		if line == 1 {
			if !maps.Equal(delta, map[string]any{"role": "assistant", "content": ""}) {
				t.Fatalf("first delta %v, want the assistant role and empty content", delta)
			}
			continue
		}
		r1, hasR1 := delta["reasoning"].(string)
		r2, hasR2 := delta["reasoning_content"].(string)
		c, hasC := delta["content"].(string)
		switch {
		case hasR1 || hasR2:
			if sawContent {
				t.Fatalf("line %d: reasoning delta after content", line)
			}
			want := map[string]bool{FieldReasoning: hasR1 && !hasR2, FieldReasoningContent: hasR2 && !hasR1, FieldBoth: hasR1 && hasR2 && r1 == r2}
			if !want[field] {
				t.Fatalf("line %d: reasoning delta %v for ReasoningField %q", line, delta, field)
			}
			if hasR1 {
				reasoning.WriteString(r1)
			} else {
				reasoning.WriteString(r2)
			}
			a.Chunks++
		case hasC && len(delta) == 1:
			if c != "" {
				sawContent = true
				content.WriteString(c)
				a.Chunks++
			} else if choice["finish_reason"] != "stop" {
				t.Fatalf("line %d: empty content delta without finish_reason stop", line)
			}
		default:
			t.Fatalf("line %d: unexpected delta %v", line, delta)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !sawDone {
		t.Fatal("stream ended without [DONE]")
	}
	if finishes != 1 {
		t.Fatalf("%d chunks with a finish_reason, want 1", finishes)
	}
	if sawUsage != includeUsage {
		t.Fatalf("usage chunk seen %v, include_usage %v", sawUsage, includeUsage)
	}
	a.Reasoning = reasoning.String()
	a.Content = content.String()
	return a
}

func sawUsageKeys(got []string) bool {
	return slices.Equal(got, []string{"choices", "created", "id", "model", "object", "usage"})
}

func TestModels(t *testing.T) {
	_, ts := start(t, Options{Model: "Qwen/Qwen3-8B"})
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := decodeMap(t, resp.Body)
	if m["object"] != "list" {
		t.Errorf("object = %v", m["object"])
	}
	data := m["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("%d models", len(data))
	}
	model := data[0].(map[string]any)
	for k, want := range map[string]any{"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "root": "Qwen/Qwen3-8B"} {
		if model[k] != want {
			t.Errorf("%s = %v, want %v", k, model[k], want)
		}
	}
	if num(t, model["created"]) <= 0 {
		t.Errorf("created = %v", model["created"])
	}
}

func TestPlainShape(t *testing.T) {
	for _, field := range []string{FieldReasoning, FieldReasoningContent, FieldBoth, FieldNone} {
		t.Run(field, func(t *testing.T) {
			_, ts := start(t, Options{ReasoningField: field, MeanTokens: 50, Seed: 7})
			a, m := plain(t, ts.URL, map[string]any{"model": "mock-model", "messages": userMessages("What is two plus two?"), "max_tokens": 4096})

			if got, want := keys(m), []string{"choices", "created", "id", "model", "object", "prompt_logprobs", "usage"}; !slices.Equal(got, want) {
				t.Errorf("top-level keys %v, want %v", got, want)
			}
			if m["object"] != "chat.completion" || m["model"] != "mock-model" || m["prompt_logprobs"] != nil {
				t.Errorf("object %v model %v prompt_logprobs %v", m["object"], m["model"], m["prompt_logprobs"])
			}
			if id := m["id"].(string); !strings.HasPrefix(id, "chatcmpl-") || len(id) != len("chatcmpl-")+32 {
				t.Errorf("id = %q", id)
			}
			choice := m["choices"].([]any)[0].(map[string]any)
			if got, want := keys(choice), []string{"finish_reason", "index", "logprobs", "message", "stop_reason"}; !slices.Equal(got, want) {
				t.Errorf("choice keys %v, want %v", got, want)
			}
			msg := choice["message"].(map[string]any)
			wantMsg := map[string][]string{
				FieldReasoning:        {"content", "reasoning", "role", "tool_calls"},
				FieldReasoningContent: {"content", "reasoning_content", "role", "tool_calls"},
				FieldBoth:             {"content", "reasoning", "reasoning_content", "role", "tool_calls"},
				FieldNone:             {"content", "role", "tool_calls"},
			}[field]
			if got := keys(msg); !slices.Equal(got, wantMsg) {
				t.Errorf("message keys %v, want %v", got, wantMsg)
			}
			if field == FieldBoth && msg["reasoning"] != msg["reasoning_content"] {
				t.Errorf("both: reasoning %q != reasoning_content %q", msg["reasoning"], msg["reasoning_content"])
			}
			if tc, ok := msg["tool_calls"].([]any); !ok || len(tc) != 0 || msg["role"] != "assistant" {
				t.Errorf("tool_calls %v role %v", msg["tool_calls"], msg["role"])
			}
			if got, want := keys(m["usage"]), []string{"completion_tokens", "prompt_tokens", "prompt_tokens_details", "total_tokens"}; !slices.Equal(got, want) {
				t.Errorf("usage keys %v, want %v", got, want)
			}
			if (field == FieldNone) != (a.Reasoning == "") || a.Content == "" {
				t.Errorf("reasoning %q content %q", a.Reasoning, a.Content)
			}
			if a.Finish != "stop" || a.Prompt != 8 || a.Completion < 2 {
				t.Errorf("finish %q prompt %d completion %d; want stop, 8 words, >= 2", a.Finish, a.Prompt, a.Completion)
			}
		})
	}
}

func TestStreamShape(t *testing.T) {
	for _, field := range []string{FieldReasoning, FieldReasoningContent, FieldBoth, FieldNone} {
		for _, usage := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/include_usage=%v", field, usage), func(t *testing.T) {
				_, ts := start(t, Options{ReasoningField: field, MeanTokens: 80, Seed: 3})
				body := map[string]any{"messages": userMessages("Explain streaming."), "max_tokens": 4096}
				got := stream(t, ts.URL, body, field, usage)
				want, _ := plain(t, ts.URL, body)
				if got.Reasoning != want.Reasoning || got.Content != want.Content || got.Finish != want.Finish {
					t.Errorf("streamed answer differs from the plain one:\n got %+v\nwant %+v", got, want)
				}
				if got.Chunks != want.Completion {
					t.Errorf("%d token chunks, want completion_tokens %d", got.Chunks, want.Completion)
				}
				if usage && (got.Completion != want.Completion || got.Prompt != want.Prompt) {
					t.Errorf("stream usage %d/%d, plain %d/%d", got.Prompt, got.Completion, want.Prompt, want.Completion)
				}
			})
		}
	}
}

func TestMaxTokens(t *testing.T) {
	tests := []struct {
		name       string
		body       map[string]any
		wantTokens int
		wantFinish string
	}{
		{"truncated", map[string]any{"max_tokens": 20}, 20, "length"},
		{"max_completion_tokens wins", map[string]any{"max_tokens": 50, "max_completion_tokens": 9}, 9, "length"},
		{"two tokens", map[string]any{"max_tokens": 2}, 2, "length"},
		{"one token", map[string]any{"max_tokens": 1}, 1, "length"},
	}
	// A huge mean makes every drawn answer longer than the cap.
	_, ts := start(t, Options{MeanTokens: 100000})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["messages"] = userMessages("Write a long essay.")
			for _, streamed := range []bool{false, true} {
				var a answer
				if streamed {
					a = stream(t, ts.URL, tt.body, FieldReasoning, true)
				} else {
					a, _ = plain(t, ts.URL, tt.body)
				}
				if a.Completion != tt.wantTokens || a.Finish != tt.wantFinish {
					t.Errorf("stream=%v: %d tokens, finish %q; want %d, %q", streamed, a.Completion, a.Finish, tt.wantTokens, tt.wantFinish)
				}
				if a.Reasoning == "" || (tt.wantTokens >= 2 && a.Content == "") {
					t.Errorf("stream=%v: reasoning %q content %q: want both non-empty", streamed, a.Reasoning, a.Content)
				}
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	_, ts := start(t, Options{})
	tests := []struct {
		name      string
		body      string
		code      int
		typ       string
		wantInMsg string
	}{
		{"bad JSON", `{"messages": [`, 400, "BadRequestError", "invalid JSON"},
		{"missing messages", `{"model":"mock-model"}`, 400, "BadRequestError", "messages: field required"},
		{"empty messages", `{"messages":[]}`, 400, "BadRequestError", "at least one message"},
		{"missing role", `{"messages":[{"content":"hi"}]}`, 400, "BadRequestError", "messages[0].role"},
		{"content not text", `{"messages":[{"role":"user","content":42}]}`, 400, "BadRequestError", "content"},
		{"max_tokens zero", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "BadRequestError", "max_tokens"},
		{"negative temperature", `{"messages":[{"role":"user","content":"hi"}],"temperature":-1}`, 400, "BadRequestError", "temperature"},
		{"unknown model", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "NotFoundError", "gpt-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.code)
			}
			m := decodeMap(t, resp.Body)
			if got := keys(m); !slices.Equal(got, []string{"code", "message", "object", "param", "type"}) {
				t.Errorf("error keys %v", got)
			}
			if m["object"] != "error" || m["type"] != tt.typ || num(t, m["code"]) != tt.code {
				t.Errorf("error %v", m)
			}
			if msg, _ := m["message"].(string); !strings.Contains(msg, tt.wantInMsg) {
				t.Errorf("message %q does not mention %q", msg, tt.wantInMsg)
			}
		})
	}
}

func TestDeterministicBySeed(t *testing.T) {
	body := func(text string) map[string]any {
		return map[string]any{"messages": userMessages(text), "max_tokens": 4096, "temperature": 0.6}
	}
	_, ts1 := start(t, Options{Seed: 42, MeanTokens: 60})
	_, restarted := start(t, Options{Seed: 42, MeanTokens: 60})
	_, otherSeed := start(t, Options{Seed: 43, MeanTokens: 60})

	first, _ := plain(t, ts1.URL, body("Name a prime."))
	retry, _ := plain(t, ts1.URL, body("Name a prime."))
	resumed, _ := plain(t, restarted.URL, body("Name a prime."))
	if first != retry || first != resumed {
		t.Errorf("same seed and prompt, different answers:\n%+v\n%+v\n%+v", first, retry, resumed)
	}
	other, _ := plain(t, otherSeed.URL, body("Name a prime."))
	otherPrompt, _ := plain(t, ts1.URL, body("Name a composite."))
	if other.Content == first.Content || otherPrompt.Content == first.Content {
		t.Errorf("a different seed or prompt gave the same answer %q", first.Content)
	}
}

// scrape reads /metrics and returns the value of each vllm: sample by name
// and finished_reason, checking the labels on the way.
func scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	fams, err := parseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["engine"] != "0" || labels["model_name"] == "" {
				t.Errorf("%s: labels %v, want engine=0 and model_name", name, labels)
			}
			key := name
			if r, ok := labels["finished_reason"]; ok {
				key += "{" + r + "}"
			}
			if k, ok := labels["kind"]; ok {
				key += "{" + k + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func TestMetricsCountServedTokens(t *testing.T) {
	_, ts := start(t, Options{MeanTokens: 40, Seed: 9})
	var wantGen, wantPrompt, stops, lengths int
	for i := range 12 {
		body := map[string]any{"messages": userMessages(fmt.Sprintf("question %d with some words", i))}
		if i%3 == 0 {
			body["max_tokens"] = 15
		}
		var a answer
		if i%2 == 0 {
			a = stream(t, ts.URL, body, FieldReasoning, true)
		} else {
			a, _ = plain(t, ts.URL, body)
		}
		wantGen += a.Completion
		wantPrompt += a.Prompt
		if a.Finish == "stop" {
			stops++
		} else {
			lengths++
		}
	}
	m := scrape(t, ts.URL)
	checks := map[string]float64{
		"vllm:generation_tokens_total":       float64(wantGen),
		"vllm:prompt_tokens_total":           float64(wantPrompt),
		"vllm:request_success_total{stop}":   float64(stops),
		"vllm:request_success_total{length}": float64(lengths),
		"vllm:request_success_total{abort}":  0,
		"vllm:num_requests_running":          0,
		"vllm:num_requests_waiting":          0,
		"vllm:kv_cache_usage_perc":           0,
		"mock_requests_total":                float64(stops + lengths),
	}
	for name, want := range checks {
		got, ok := m[name]
		if !ok {
			t.Errorf("%s missing from /metrics", name)
		} else if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// waitFor polls cond until it holds, or fails after 30 s (a bound for a
// failure, not a wait: a loaded machine may take seconds).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMaxRunningQueues(t *testing.T) {
	s, ts := start(t, Options{MaxRunning: 2, TTFT: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions",
				strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":"slow %d"}]}`, i)))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	waitFor(t, "2 running and 3 waiting", func() bool { st := s.Stats(); return st.Running == 2 && st.Waiting == 3 })
	m := scrape(t, ts.URL)
	if m["vllm:num_requests_running"] != 2 || m["vllm:num_requests_waiting"] != 3 || m["vllm:kv_cache_usage_perc"] != 1 {
		t.Errorf("/metrics running %v waiting %v kv %v; want 2, 3, 1", m["vllm:num_requests_running"], m["vllm:num_requests_waiting"], m["vllm:kv_cache_usage_perc"])
	}
	cancel() // clients give up: every slot and queue place must be released
	wg.Wait()
	waitFor(t, "all aborted", func() bool { return s.Stats().Aborted == 5 })
	if st := s.Stats(); st.Running != 0 || st.Waiting != 0 || st.PeakRunning != 2 || st.Completed != 0 {
		t.Errorf("after cancel: %+v", st)
	}
	if got := scrape(t, ts.URL)["vllm:request_success_total{abort}"]; got != 5 {
		t.Errorf("aborted requests on /metrics = %v, want 5", got)
	}
}

func TestQueueIsFIFO(t *testing.T) {
	s, ts := start(t, Options{MaxRunning: 1, TTFT: 50 * time.Millisecond, MeanTokens: 5})
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 4 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"%d"}]}`, i)
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		// Each request holds its place in the queue before the next one is sent.
		waitFor(t, "request queued", func() bool {
			st := s.Stats()
			return st.Running+st.Waiting+st.Completed == int64(i+1)
		})
	}
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3}) {
		t.Errorf("completion order %v, want arrival order", order)
	}
}

func TestProgressDuringLongAnswer(t *testing.T) {
	s, ts := start(t, Options{TokenDelay: 2 * time.Millisecond, MeanTokens: 100000})
	body, _ := json.Marshal(map[string]any{"messages": userMessages("go"), "max_tokens": 100, "stream": true})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for range 10 { // the role chunk and a few tokens, each as its own frame
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	mid := scrape(t, ts.URL)["vllm:generation_tokens_total"]
	if mid < 5 || mid >= 100 {
		t.Errorf("generation_tokens_total mid-answer = %v, want some progress below 100", mid)
	}
	io.Copy(io.Discard, r)
	if got := s.Stats().GenerationTokens; got != 100 {
		t.Errorf("generation tokens after the answer = %d, want 100", got)
	}
}

func TestClientGoneReleasesSlot(t *testing.T) {
	s, ts := start(t, Options{MaxRunning: 1, TokenDelay: 5 * time.Millisecond, MeanTokens: 100000})
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, ts.URL, map[string]any{"messages": userMessages("long"), "stream": true, "max_tokens": 10000})
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "abort", func() bool { return s.Stats().Aborted == 1 && s.Stats().Running == 0 })
	if gen := s.Stats().GenerationTokens; gen >= 10000 {
		t.Errorf("generated %d tokens for a client that left", gen)
	}
	// The freed slot serves the next request.
	a, _ := plain(t, ts.URL, map[string]any{"messages": userMessages("short"), "max_tokens": 3})
	if a.Completion != 3 {
		t.Errorf("next request: %+v", a)
	}
}

func TestLengthsAreLongTailed(t *testing.T) {
	const mean, n = 300, 4000
	var sum, longest int
	for i := range n {
		p := newPlan(1, uint64(i)*0x9e3779b97f4a7c15, mean, maxTokenLimit)
		if p.finish != "stop" || p.reasoning < 1 || p.reasoning >= p.total {
			t.Fatalf("plan %d: %+v", i, p)
		}
		sum += p.total
		longest = max(longest, p.total)
	}
	if got := float64(sum) / n; got < mean*0.9 || got > mean*1.1 {
		t.Errorf("mean length %.0f, want about %d", got, mean)
	}
	if longest < 3*mean {
		t.Errorf("longest answer %d tokens: no long tail above %d", longest, 3*mean)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{}, ""},
		{Options{ReasoningField: "thinking"}, "reasoning field"},
		{Options{TokenDelay: -1}, "token delay"},
		{Options{TTFT: -1}, "ttft"},
		{Options{MeanTokens: -5}, "mean tokens"},
		{Options{MaxRunning: -1}, "max running"},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want an error about %q", tt.opts, err, tt.want)
		}
	}
}

// A server without a reasoning parser sends the model's thought inside
// content, in think tags, as vLLM without --reasoning-parser does: the same
// answer as a parsing server's, reasoning and content joined.
func TestNoParserThinkTags(t *testing.T) {
	body := map[string]any{"messages": userMessages("Why is the sky blue?"), "max_tokens": 4096}
	_, parsed := start(t, Options{ReasoningField: FieldReasoning, MeanTokens: 60, Seed: 11})
	_, raw := start(t, Options{ReasoningField: FieldNone, MeanTokens: 60, Seed: 11})
	want, _ := plain(t, parsed.URL, body)
	wantContent := "<think>\n" + want.Reasoning + "\n</think>\n\n" + want.Content
	got, _ := plain(t, raw.URL, body)
	if got.Reasoning != "" || got.Content != wantContent {
		t.Errorf("plain: reasoning %q content %q; want no reasoning and content %q", got.Reasoning, got.Content, wantContent)
	}
	streamed := stream(t, raw.URL, body, FieldNone, true)
	if streamed.Reasoning != "" || streamed.Content != wantContent || streamed.Chunks != want.Completion {
		t.Errorf("stream: reasoning %q content %q in %d chunks; want content %q in %d", streamed.Reasoning, streamed.Content,
			streamed.Chunks, wantContent, want.Completion)
	}
}

// TestMaxModelLen: with --max-model-len the mock reports the context in
// /v1/models and refuses, as vLLM does, a request whose prompt tokens plus
// max_tokens exceed it; one without max_tokens only needs its prompt to fit.
func TestMaxModelLen(t *testing.T) {
	s, ts := start(t, Options{MaxModelLen: 20, MeanTokens: 5})
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	m := decodeMap(t, resp.Body)
	resp.Body.Close()
	if got := num(t, m["data"].([]any)[0].(map[string]any)["max_model_len"]); got != 20 {
		t.Errorf("max_model_len = %v, want 20", got)
	}
	// "You are terse." and "a b c d e": 8 prompt tokens.
	for _, c := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"model": "mock-model", "messages": userMessages("a b c d e"), "max_tokens": 12}, 200},
		{map[string]any{"model": "mock-model", "messages": userMessages("a b c d e"), "max_tokens": 13}, 400},
		{map[string]any{"model": "mock-model", "messages": userMessages("a b c d e"), "max_completion_tokens": 13}, 400},
		{map[string]any{"model": "mock-model", "messages": userMessages("a b c d e")}, 200},
		{map[string]any{"model": "mock-model", "messages": userMessages(strings.Repeat("w ", 30))}, 400},
	} {
		resp := post(t, context.Background(), ts.URL, c.body)
		body := decodeMap(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%v: status %d, want %d (%v)", c.body, resp.StatusCode, c.status, body)
		}
		if c.status == 400 {
			msg, _ := body["message"].(string)
			if !strings.HasPrefix(msg, "This model's maximum context length is 20 tokens. However, you requested ") || num(t, body["code"]) != 400 {
				t.Errorf("refusal body %v", body)
			}
		}
	}
	want := "This model's maximum context length is 20 tokens. However, you requested 13 output tokens and your prompt contains 8 input tokens, for a total of 21 tokens. Please reduce the length of the input prompt or the number of requested output tokens."
	resp = post(t, context.Background(), ts.URL, map[string]any{"model": "mock-model", "messages": userMessages("a b c d e"), "max_tokens": 13})
	if got := decodeMap(t, resp.Body)["message"]; got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
	resp.Body.Close()
	if st := s.Stats(); st.TooLong != 4 || st.Requests != 6 || st.Completed != 2 {
		t.Errorf("stats: %d too long, %d requests, %d completed; want 4, 6, 2", st.TooLong, st.Requests, st.Completed)
	}
}
