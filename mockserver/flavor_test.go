package mockserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func getMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	fams, err := parseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			out[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// Each flavour serves its server's names, read from the same counters; no
// vLLM name leaks into another flavour.
func TestFlavorMetrics(t *testing.T) {
	tests := []struct {
		flavor      string
		gen, prompt string
		gauges      []string
		absent      []string
	}{
		{FlavorVLLM, "vllm:generation_tokens_total", "vllm:prompt_tokens_total",
			[]string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"}, nil},
		{FlavorSGLang, "sglang:generation_tokens_total", "sglang:prompt_tokens_total",
			[]string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:num_retracted_requests_total"},
			[]string{"vllm:generation_tokens_total", "vllm:num_requests_running"}},
		{FlavorLlamaCpp, "llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_total",
			[]string{"llamacpp:requests_processing", "llamacpp:requests_deferred"},
			[]string{"vllm:generation_tokens_total", "llamacpp:kv_cache_usage_ratio", "vllm:num_preemptions_total"}},
	}
	for _, tc := range tests {
		t.Run(tc.flavor, func(t *testing.T) {
			s, ts := start(t, Options{Flavor: tc.flavor, MeanTokens: 20})
			a, _ := plain(t, ts.URL, map[string]any{"messages": userMessages("a b c"), "max_tokens": 64})
			m := getMetrics(t, ts.URL)
			st := s.Stats()
			if m[tc.gen] != float64(st.GenerationTokens) || m[tc.gen] != float64(a.Completion) {
				t.Errorf("%s = %v, want %d generated", tc.gen, m[tc.gen], a.Completion)
			}
			if m[tc.prompt] != float64(st.PromptTokens) || st.PromptTokens == 0 {
				t.Errorf("%s = %v, want %d", tc.prompt, m[tc.prompt], st.PromptTokens)
			}
			for _, g := range tc.gauges {
				if _, ok := m[g]; !ok {
					t.Errorf("no %s", g)
				}
			}
			for _, n := range tc.absent {
				if _, ok := m[n]; ok {
					t.Errorf("%s served in the %s flavour", n, tc.flavor)
				}
			}
			if _, ok := m["mock_faults_injected_total"]; !ok {
				t.Error("no mock_faults_injected_total")
			}
		})
	}
}

// With its metrics off, llama-server answers 501 and says which flag to
// add; SGLang without --enable-metrics has no route (FastAPI's 404).
func TestNoMetrics(t *testing.T) {
	_, ts := start(t, Options{Flavor: FlavorLlamaCpp, NoMetrics: true})
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with ` + "`--metrics`" + `","type":"not_supported_error"}}`
	if resp.StatusCode != http.StatusNotImplemented || string(body) != want {
		t.Errorf("%s %s, want 501 %s", resp.Status, body, want)
	}
	_, ts = start(t, Options{Flavor: FlavorSGLang, NoMetrics: true})
	resp, err = http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || string(body) != `{"detail":"Not Found"}` {
		t.Errorf("%s %s", resp.Status, body)
	}
}

// Each flavour says the context where its server does: SGLang as
// max_model_len, llama-server as meta.n_ctx beside an Ollama-style list;
// each names itself in owned_by.
func TestFlavorModels(t *testing.T) {
	get := func(url string) map[string]any {
		resp, err := http.Get(url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return decodeMap(t, resp.Body)
	}
	_, ts := start(t, Options{Flavor: FlavorLlamaCpp, MaxModelLen: 4096})
	m := get(ts.URL)
	entry := m["data"].([]any)[0].(map[string]any)
	meta := entry["meta"].(map[string]any)
	if entry["owned_by"] != "llamacpp" || num(t, meta["n_ctx"]) != 4096 || entry["max_model_len"] != nil || m["models"] == nil {
		t.Errorf("llamacpp /v1/models = %v", m)
	}
	_, ts = start(t, Options{Flavor: FlavorSGLang, MaxModelLen: 4096})
	entry = get(ts.URL)["data"].([]any)[0].(map[string]any)
	if entry["owned_by"] != "sglang" || num(t, entry["max_model_len"]) != 4096 || entry["meta"] != nil {
		t.Errorf("sglang /v1/models entry = %v", entry)
	}
	_, ts = start(t, Options{})
	if entry := get(ts.URL)["data"].([]any)[0].(map[string]any); entry["owned_by"] != "vllm" {
		t.Errorf("vllm /v1/models entry = %v", entry)
	}
}

// llama-server refuses only a prompt that fills its context, with the
// sizes as fields of the error; a prompt that fits with room to spare
// answers until the context is full: finish_reason length, fewer tokens
// than max_tokens, streamed or not.
func TestLlamaCppContext(t *testing.T) {
	s, ts := start(t, Options{Flavor: FlavorLlamaCpp, MaxModelLen: 20, MeanTokens: 1000})
	// "You are terse." and "a b c d e": 8 prompt tokens; 12 left.
	body := map[string]any{"messages": userMessages("a b c d e"), "max_tokens": 100}
	a, _ := plain(t, ts.URL, body)
	if a.Finish != "length" || a.Completion != 12 || a.Prompt != 8 {
		t.Errorf("plain: %+v, want length after 12 tokens", a)
	}
	sa := stream(t, ts.URL, body, FieldReasoning, true)
	if sa.Finish != "length" || sa.Completion != 12 || sa.Chunks != 12 {
		t.Errorf("stream: %+v, want length after 12 tokens", sa)
	}
	// Short answers are untouched.
	short, _ := plain(t, ts.URL, map[string]any{"messages": userMessages("a b c d e"), "max_tokens": 3})
	if short.Finish != "length" || short.Completion != 3 {
		t.Errorf("max_tokens 3: %+v", short)
	}

	resp := post(t, context.Background(), ts.URL, map[string]any{"messages": userMessages(strings.Repeat("w ", 30))})
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Error struct {
			Code          int    `json:"code"`
			Message       string `json:"message"`
			Type          string `json:"type"`
			NPromptTokens int    `json:"n_prompt_tokens"`
			NCtx          int    `json:"n_ctx"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	e := got.Error
	if resp.StatusCode != 400 || e.Code != 400 || e.Type != "exceed_context_size_error" || e.NPromptTokens != 33 || e.NCtx != 20 ||
		e.Message != "request (33 tokens) exceeds the available context size (20 tokens), try increasing it" {
		t.Errorf("refusal %d %s", resp.StatusCode, raw)
	}
	if st := s.Stats(); st.TooLong != 1 {
		t.Errorf("TooLong = %d, want 1", st.TooLong)
	}
}

func TestValidateFlavor(t *testing.T) {
	if err := (Options{Flavor: "tgi"}).Validate(); err == nil || !strings.Contains(err.Error(), `flavor "tgi"`) {
		t.Errorf("Validate = %v", err)
	}
	for _, f := range []string{"", FlavorVLLM, FlavorSGLang, FlavorLlamaCpp} {
		if err := (Options{Flavor: f}).Validate(); err != nil {
			t.Errorf("flavor %q: %v", f, err)
		}
	}
}
