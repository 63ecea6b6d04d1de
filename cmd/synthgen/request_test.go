package main

// What the configuration says is what the server receives: `synthgen run`
// against a server that records every request body, with the keys that
// shape a request set in a config file, in SYNTHGEN_* variables or in
// flags, and the three at once to check which wins. The checks read only
// the command line, the environment and the HTTP bodies, so they hold
// however run.go builds its engine.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/synthgen/synthgen/sink"
)

// recordingModels are the models the recording server lists; a job that
// names none of them gets the first, so the cases name another.
var recordingModels = []string{"default-model", "org/Model-B", "org/Model-C"}

// recordingServer is a vLLM-shaped server (GET /v1/models, POST
// /v1/chat/completions plain or streamed) that keeps every chat request
// body as it arrived.
type recordingServer struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *recordingServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// answerFor is the server's answer to a conversation whose last turn is
// prompt; records on disk are checked against it.
func answerFor(prompt string) string { return "answer to <" + prompt + ">" }

func (s *recordingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		data := make([]map[string]any, len(recordingModels))
		for i, id := range recordingModels {
			data[i] = map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "vllm", "root": id, "parent": nil, "max_model_len": 4096}
		}
		writeJSONBody(w, map[string]any{"object": "list", "data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		n := len(s.bodies)
		s.mu.Unlock()
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, fmt.Sprintf(`{"object":"error","message":"bad request body: %v","type":"BadRequestError","code":400}`, err), http.StatusBadRequest)
			return
		}
		answer := answerFor(req.Messages[len(req.Messages)-1].Content)
		usage := map[string]any{"prompt_tokens": 12, "total_tokens": 12 + 5, "completion_tokens": 5}
		envelope := func(object string) map[string]any {
			return map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": object, "created": 1700000000, "model": req.Model}
		}
		if !req.Stream {
			resp := envelope("chat.completion")
			resp["choices"] = []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": answer, "tool_calls": []any{}},
				"logprobs":      nil,
				"finish_reason": "stop",
				"stop_reason":   nil,
			}}
			resp["usage"] = usage
			resp["prompt_logprobs"] = nil
			writeJSONBody(w, resp)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			c := envelope("chat.completion.chunk")
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
			writeSSEEvent(w, c)
		}
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		half := len(answer) / 2
		chunk(map[string]any{"content": answer[:half]}, nil)
		chunk(map[string]any{"content": answer[half:]}, nil)
		chunk(map[string]any{"content": ""}, "stop")
		if req.StreamOptions.IncludeUsage {
			c := envelope("chat.completion.chunk")
			c["choices"] = []any{}
			c["usage"] = usage
			writeSSEEvent(w, c)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

func writeJSONBody(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeSSEEvent(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// shaping is the value of every key that shapes a request.
type shaping struct {
	model        string
	temperature  float64
	topP         float64
	maxTokens    int
	n            int
	systemPrompt string
	stream       bool
	extraBody    string // a JSON object
	tokenIDs     bool   // generation.return_token_ids
	logprobs     int    // generation.logprobs
}

// values are the shaping keys as the strings a flag or a variable carries.
func (s shaping) values() map[string]string {
	return map[string]string{
		"endpoint.model":              s.model,
		"generation.temperature":      strconv.FormatFloat(s.temperature, 'g', -1, 64),
		"generation.top_p":            strconv.FormatFloat(s.topP, 'g', -1, 64),
		"generation.max_tokens":       strconv.Itoa(s.maxTokens),
		"generation.n":                strconv.Itoa(s.n),
		"generation.system_prompt":    s.systemPrompt,
		"generation.stream":           strconv.FormatBool(s.stream),
		"generation.extra_body":       s.extraBody,
		"generation.return_token_ids": strconv.FormatBool(s.tokenIDs),
		"generation.logprobs":         strconv.Itoa(s.logprobs),
	}
}

// tree is the shaping keys as a config file's nested mapping, extra_body a
// mapping too (as a person writes it), numbers as numbers.
func (s shaping) tree(t *testing.T) map[string]any {
	t.Helper()
	return map[string]any{
		"endpoint": map[string]any{"model": s.model},
		"generation": map[string]any{
			"temperature":      s.temperature,
			"top_p":            s.topP,
			"max_tokens":       s.maxTokens,
			"n":                s.n,
			"system_prompt":    s.systemPrompt,
			"stream":           s.stream,
			"extra_body":       jsonObjectT(t, s.extraBody),
			"return_token_ids": s.tokenIDs,
			"logprobs":         s.logprobs,
		},
	}
}

func jsonObjectT(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("extra_body %s: %v", s, err)
	}
	return m
}

// requestJob is one run's plumbing: the server, the dataset and the
// output directory, which every source below sets too.
type requestJob struct {
	baseURL, data, dir string
}

// tree is the plumbing as a config file's mapping.
func (j requestJob) tree(tree map[string]any) {
	setNestedKey(tree, "endpoint.base_url", j.baseURL)
	setNestedKey(tree, "dataset.path", j.data)
	setNestedKey(tree, "output.dir", j.dir)
	setNestedKey(tree, "output.format", "jsonl")
	setNestedKey(tree, "concurrency", 4)
}

func (j requestJob) values() map[string]string {
	return map[string]string{
		"endpoint.base_url": j.baseURL,
		"dataset.path":      j.data,
		"output.dir":        j.dir,
		"output.format":     "jsonl",
		"concurrency":       "4",
	}
}

// requestPrompts are the user turns of the dataset requestDataset writes.
var requestPrompts = []string{
	`what is 2+2?`,
	`quote "this" & <that> ✓`,
	"two\nlines\tand a tab",
}

// requestDataset writes the prompts as ShareGPT rows, the first and the
// last with a system turn of their own that generation.system_prompt
// replaces.
func requestDataset(t *testing.T) string {
	t.Helper()
	type turn struct {
		From  string `json:"from"`
		Value string `json:"value"`
	}
	var b strings.Builder
	for i, p := range requestPrompts {
		var conv []turn
		if i != 1 {
			conv = append(conv, turn{"system", "the dataset's own system turn"})
		}
		conv = append(conv, turn{"human", p}, turn{"gpt", "the dataset's own answer"})
		line, err := json.Marshal(map[string]any{"conversations": conv, "source": "x"})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// clearSynthgenEnv unsets every SYNTHGEN_* variable for the test (restored
// after it), so that a developer's shell cannot configure the runs below.
func clearSynthgenEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SYNTHGEN_") {
			t.Setenv(name, "") // registers the restore
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// setEnvKeys sets the variables of dotted keys by the documented rule
// (generation.top_p is SYNTHGEN_GENERATION_TOP_P), spelled out here rather
// than asked of the config package so that a change to the rule fails.
func setEnvKeys(t *testing.T, values map[string]string) {
	t.Helper()
	for k, v := range values {
		t.Setenv("SYNTHGEN_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_")), v)
	}
}

func flagArgs(values map[string]string) []string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		// --key=value: a bool flag takes no separate value.
		args = append(args, "--"+k+"="+values[k])
	}
	return args
}

func writeYAMLConfig(t *testing.T, tree map[string]any) (path, text string) {
	t.Helper()
	b, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, string(b)
}

// setNestedKey sets the dotted key in a config tree.
func setNestedKey(tree map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	m := tree
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
}

// TestRunSendsWhatTheConfigSays runs small jobs whose request-shaping keys
// come from a config file, from SYNTHGEN_* variables or from flags, and
// checks every request body the server got against them.
func TestRunSendsWhatTheConfigSays(t *testing.T) {
	// Not parallel: the subtests set environment variables.
	clearSynthgenEnv(t)
	cases := []shaping{
		// temperature 0 must reach the server as 0, not be left out (vLLM
		// would then take the model's default).
		{
			model: "org/Model-B", temperature: 0, topP: 0.85, maxTokens: 321, n: 3,
			systemPrompt: "You are a careful tester.", stream: true,
			extraBody: `{"top_k": 20, "chat_template_kwargs": {"enable_thinking": true}, "vllm_xargs": {"TraceID": "Ab-9"}}`,
			tokenIDs:  true, logprobs: 7,
		},
		// A temperature neither 0 (a dropped field) nor the default 0.6.
		{
			model: "org/Model-C", temperature: 1.3, topP: 0.5, maxTokens: 77, n: 2,
			systemPrompt: "Réponds en français.", stream: false,
			extraBody: `{"top_k": 5, "Repetition_Penalty": 1.05, "chat_template_kwargs": {"enable_thinking": false}}`,
		},
	}
	for _, source := range []string{"file", "env", "flags"} {
		for _, want := range cases {
			t.Run(fmt.Sprintf("%s/stream=%t", source, want.stream), func(t *testing.T) {
				srv := &recordingServer{}
				ts := httptest.NewServer(srv)
				t.Cleanup(ts.Close)
				job := requestJob{baseURL: ts.URL + "/v1", data: requestDataset(t), dir: filepath.Join(t.TempDir(), "out")}
				args := []string{"run", "--quiet"}
				switch source {
				case "file":
					tree := want.tree(t)
					job.tree(tree)
					path, text := writeYAMLConfig(t, tree)
					t.Logf("config file:\n%s", text)
					args = append(args, "--config", path)
				case "env":
					setEnvKeys(t, job.values())
					setEnvKeys(t, want.values())
				case "flags":
					args = append(args, flagArgs(job.values())...)
					args = append(args, flagArgs(want.values())...)
				}
				cliRun(t, args...).ok(t, source)
				checkRequests(t, srv.requests(), want)
				checkRequestRecords(t, job.dir, want.n)
			})
		}
	}

	// A flag wins over its variable, which wins over the file.
	t.Run("precedence", func(t *testing.T) {
		srv := &recordingServer{}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		job := requestJob{baseURL: ts.URL + "/v1", data: requestDataset(t), dir: filepath.Join(t.TempDir(), "out")}
		file := shaping{
			model: "default-model", temperature: 0.9, topP: 0.3, maxTokens: 111, n: 2,
			systemPrompt: "from the file", stream: true,
			extraBody: `{"top_k": 1, "from_file": true}`,
		}
		tree := file.tree(t)
		job.tree(tree)
		path, text := writeYAMLConfig(t, tree)
		t.Logf("config file:\n%s", text)
		// Every shaping key in the environment, all but n different from
		// the file's; n is left to the file.
		setEnvKeys(t, map[string]string{
			"endpoint.model":           "org/Model-B",
			"generation.temperature":   "0.4",
			"generation.top_p":         "0.75",
			"generation.max_tokens":    "222",
			"generation.system_prompt": "from the environment",
			"generation.stream":        "false",
			"generation.extra_body":    `{"top_k": 2, "From_Env": "yes"}`,
		})
		flags := map[string]string{
			"endpoint.model":         "org/Model-C",
			"generation.temperature": "0", // a flag's 0 wins over the others' non-zero
			"generation.max_tokens":  "333",
			"generation.stream":      "true",
			"generation.extra_body":  `{"top_k": 40, "chat_template_kwargs": {"enable_thinking": true}}`,
		}
		args := append([]string{"run", "--quiet", "--config", path}, flagArgs(flags)...)
		cliRun(t, args...).ok(t, "precedence")
		want := shaping{
			model:        "org/Model-C",          // flag
			temperature:  0,                      // flag
			topP:         0.75,                   // env
			maxTokens:    333,                    // flag
			n:            2,                      // file
			systemPrompt: "from the environment", // env
			stream:       true,                   // flag
			extraBody:    flags["generation.extra_body"],
		}
		checkRequests(t, srv.requests(), want)
		checkRequestRecords(t, job.dir, want.n)
	})
}

// checkRequests checks the bodies of one run: n requests per prompt (the
// server answers one choice whatever n: the engine asks each (id, sample)
// once, its one answer kept), each
// carrying exactly the configured values and nothing else.
func checkRequests(t *testing.T, bodies [][]byte, want shaping) {
	t.Helper()
	extra := jsonObjectT(t, want.extraBody)
	allowed := map[string]bool{"model": true, "messages": true, "max_tokens": true, "temperature": true, "top_p": true, "stream": true}
	if want.stream {
		allowed["stream_options"] = true
	}
	tokens := map[string]string{} // the token keys sent, and their values
	if want.tokenIDs {
		tokens["return_token_ids"] = "true"
	}
	if want.logprobs > 0 {
		tokens["logprobs"], tokens["top_logprobs"], tokens["return_tokens_as_token_ids"] = "true", strconv.Itoa(want.logprobs), "true"
	}
	for k := range tokens {
		allowed[k] = true
	}
	for k := range extra {
		allowed[k] = true
	}
	if got, wantN := len(bodies), len(requestPrompts)*want.n; got != wantN {
		t.Errorf("the server got %d chat requests, want %d (%d prompts x generation.n %d)", got, wantN, len(requestPrompts), want.n)
	}
	perPrompt := map[string]int{}
	for i, raw := range bodies {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("request %d: "+format+"\nbody: %s", append([]any{i}, append(args, raw)...)...)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(raw, &body); err != nil {
			fail("not a JSON object: %v", err)
			continue
		}
		for k := range body {
			if k == "n" && want.n > 1 {
				// This server answers one choice: it ignores n, which the
				// first answers show, and each sample is its own request
				// from then on (the first ones carried n, then the rest of
				// their samples alone): n requests a prompt all the same.
				if got := string(body[k]); got != strconv.Itoa(want.n) {
					fail("n %s, want %d (generation.n)", got, want.n)
				}
				continue
			}
			if !allowed[k] {
				fail("unexpected key %q", k)
			}
		}
		var model string
		if err := json.Unmarshal(body["model"], &model); err != nil || model != want.model {
			fail("model %s, want %q (endpoint.model)", body["model"], want.model)
		}
		number := func(key, name string, want float64) {
			t.Helper()
			v, ok := body[key]
			if !ok {
				fail("no %q: %s %v must be sent", key, name, want)
				return
			}
			var got float64
			if err := json.Unmarshal(v, &got); err != nil || got != want {
				fail("%s %s, want %v (%s)", key, v, want, name)
			}
		}
		number("temperature", "generation.temperature", want.temperature)
		number("top_p", "generation.top_p", want.topP)
		number("max_tokens", "generation.max_tokens", float64(want.maxTokens))
		if got := string(body["stream"]); got != strconv.FormatBool(want.stream) {
			fail("stream %q, want %t (generation.stream)", got, want.stream)
		}
		for k, v := range tokens {
			if got := string(body[k]); got != v {
				fail("%s %q, want %s (generation.return_token_ids, generation.logprobs)", k, got, v)
			}
		}
		for k, v := range extra {
			raw, ok := body[k]
			if !ok {
				// Looked up as written: a key whose case changed is missing.
				fail("extra_body key %q is missing", k)
				continue
			}
			var got any
			if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, v) {
				fail("extra_body key %q is %s, want %v", k, raw, v)
			}
		}
		var msgs []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(body["messages"], &msgs); err != nil {
			fail("messages: %v", err)
			continue
		}
		// The system prompt first, the dataset's own system turn gone, then
		// the user turn (the dataset's answer is not sent).
		if len(msgs) != 2 || msgs[0].Role != "system" || msgs[0].Content != want.systemPrompt || msgs[1].Role != "user" || !slices.Contains(requestPrompts, msgs[1].Content) {
			fail("messages %+v, want [system %q, user <a dataset prompt>]", msgs, want.systemPrompt)
			continue
		}
		perPrompt[msgs[1].Content]++
	}
	for _, p := range requestPrompts {
		if perPrompt[p] != want.n {
			t.Errorf("prompt %q was asked %d times, want %d (generation.n)", p, perPrompt[p], want.n)
		}
	}
}

// checkRequestRecords checks that the run wrote each (id, sample) once,
// with the server's answer to its prompt.
func checkRequestRecords(t *testing.T, dir string, n int) {
	t.Helper()
	got := countJSONL(t, filepath.Join(dir, "data"), func(line []byte) (string, error) {
		var r sink.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return "", err
		}
		i, err := strconv.Atoi(r.ID)
		if err != nil || i < 0 || i >= len(requestPrompts) {
			return "", fmt.Errorf("record id %q is not a row of the dataset", r.ID)
		}
		if want := answerFor(requestPrompts[i]); r.Content != want || r.FinishReason != "stop" {
			return "", fmt.Errorf("record %s/%d: content %q finish_reason %q, want %q stop", r.ID, r.Sample, r.Content, r.FinishReason, want)
		}
		return fmt.Sprintf("%s/%d", r.ID, r.Sample), nil
	})
	var want []string
	for i := range requestPrompts {
		for s := range n {
			want = append(want, fmt.Sprintf("%d/%d", i, s))
		}
	}
	wantIDs(t, "records", got, want...)
}
