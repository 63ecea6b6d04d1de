package promscrape

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Each kind's text is read under its own names, and what the kind (or the
// version) does not report stays absent rather than zero.
func TestParseKinds(t *testing.T) {
	tests := []struct {
		file  string
		kind  Kind
		lacks []string
		check func(t *testing.T, s Sample)
	}{
		{"vllm-v1-engine-label.prom", KindVLLM, nil, nil},
		{"sglang.prom", KindSGLang, nil, func(t *testing.T, s Sample) {
			if s.GenerationTokens != 917504 || s.PromptTokens != 1.284032e+06 {
				t.Errorf("gen %v prompt %v", s.GenerationTokens, s.PromptTokens)
			}
			if s.Running != 96 || s.Waiting != 7 || s.KVCacheUsage != 0.73 {
				t.Errorf("running %v waiting %v kv %v, want 96 7 0.73", s.Running, s.Waiting, s.KVCacheUsage)
			}
			// The retraction counter, not the gauge beside it.
			if s.Preemptions != 5 {
				t.Errorf("preemptions %v, want the counter's 5", s.Preemptions)
			}
			// The spec gauges are there at 0: speculative decoding is off.
			if s.HasSpec || s.HasSpecGauges {
				t.Errorf("HasSpec %v HasSpecGauges %v with the gauges at 0", s.HasSpec, s.HasSpecGauges)
			}
		}},
		{"llamacpp-server.prom", KindLlamaCpp, []string{"KV-cache usage", "preemptions"}, func(t *testing.T, s Sample) {
			if s.GenerationTokens != 7801 || s.PromptTokens != 33065 || s.Running != 4 || s.Waiting != 2 {
				t.Errorf("gen %v prompt %v running %v waiting %v", s.GenerationTokens, s.PromptTokens, s.Running, s.Waiting)
			}
			if s.HasSpec {
				t.Error("HasSpec without the counters")
			}
		}},
		{"llamacpp-kv-gauge.prom", KindLlamaCpp, []string{"preemptions"}, func(t *testing.T, s Sample) {
			if !near(s.KVCacheUsage, 0.263672) || s.Running != 1 {
				t.Errorf("kv %v running %v", s.KVCacheUsage, s.Running)
			}
		}},
		{"llamacpp-spec-decode.prom", KindLlamaCpp, []string{"KV-cache usage", "preemptions"}, func(t *testing.T, s Sample) {
			// The totals, not the per-position breakdown.
			if !s.HasSpec || s.SpecDrafts != 4500 || s.SpecDraftTokens != 18000 || s.SpecAccepted != 12600 {
				t.Errorf("spec %v %v %v %v", s.HasSpec, s.SpecDrafts, s.SpecDraftTokens, s.SpecAccepted)
			}
			r := Between(Sample{At: t0.Add(-time.Minute), HasSpec: true}, s)
			if !near(r.AcceptanceRate, 0.7) || !near(r.MeanAcceptanceLength, 1+12600.0/4500) {
				t.Errorf("rate %v length %v", r.AcceptanceRate, r.MeanAcceptanceLength)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := parseString(t, readTestdata(t, tc.file), t0)
			if s.Kind != tc.kind {
				t.Fatalf("Kind = %q, want %q", s.Kind, tc.kind)
			}
			if !s.Usable() {
				t.Error("not Usable")
			}
			if got := s.Lacks(); !slices.Equal(got, tc.lacks) {
				t.Errorf("Lacks = %q, want %q", got, tc.lacks)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// A text of none of the kinds is unknown and has nothing; one with another
// kind's names is not read under vLLM's.
func TestParseUnknownKind(t *testing.T) {
	s := parseString(t, "# TYPE go_goroutines gauge\ngo_goroutines 12\n", t0)
	if s.Kind != KindUnknown || s.Usable() || len(s.Found) != 0 {
		t.Errorf("sample %+v, want an unknown, unusable one", s)
	}
	s = parseString(t, readTestdata(t, "llamacpp-server.prom"), t0)
	if s.Found[MetricGenerationTokens] || !s.Found[MetricLlamaCppTokensPredicted] {
		t.Errorf("Found = %v", s.Found)
	}
}

// SGLang under DP attention: each scheduler's gauges add up, the KV share
// and the spec gauges are their mean; the spec gauges become the window's
// acceptance.
func TestParseSGLangSchedulers(t *testing.T) {
	text := readTestdata(t, "sglang.prom")
	text = strings.ReplaceAll(text, `spec_accept_length{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0`,
		`spec_accept_length{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.2`)
	text = strings.ReplaceAll(text, `spec_accept_rate{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0`,
		`spec_accept_rate{engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.6`)
	second := `engine_type="unified",model_name="Qwen/Qwen3-8B",moe_ep_rank="0",pp_rank="0",tp_rank="1"`
	text += fmt.Sprintf("sglang:num_running_reqs{%s} 4.0\nsglang:num_queue_reqs{%s} 1.0\nsglang:token_usage{%s} 0.27\n"+
		"sglang:spec_accept_length{%s} 2.8\nsglang:spec_accept_rate{%s} 0.4\n", second, second, second, second, second)
	s := parseString(t, text, t0)
	if s.Running != 100 || s.Waiting != 8 || !near(s.KVCacheUsage, 0.5) {
		t.Errorf("running %v waiting %v kv %v, want 100 8 0.5", s.Running, s.Waiting, s.KVCacheUsage)
	}
	if !s.HasSpecGauges || !near(s.SpecAcceptLength, 3) || !near(s.SpecAcceptRate, 0.5) {
		t.Errorf("spec gauges %v %v %v", s.HasSpecGauges, s.SpecAcceptLength, s.SpecAcceptRate)
	}
	r := Between(parseString(t, readTestdata(t, "sglang.prom"), t0.Add(-10*time.Second)), s)
	if !r.HasSpec || !near(r.MeanAcceptanceLength, 3) || !near(r.AcceptanceRate, 0.5) || r.Kind != KindSGLang {
		t.Errorf("rates %+v", r)
	}
}

func TestKindOf(t *testing.T) {
	for in, want := range map[string]Kind{"vllm": KindVLLM, "sglang": KindSGLang, "llamacpp": KindLlamaCpp, " LlamaCpp ": KindLlamaCpp,
		"system": KindUnknown, "openai": KindUnknown, "": KindUnknown} {
		if got := KindOf(in); got != want {
			t.Errorf("KindOf(%q) = %q, want %q", in, got, want)
		}
	}
	if KindUnknown.Known() || !KindLlamaCpp.Known() || KindLlamaCpp.Name() != "llama.cpp" || Kind("").Name() != "the server" {
		t.Error("Known or Name wrong")
	}
}

func TestSumKind(t *testing.T) {
	a, b := Rates{Kind: KindSGLang, Servers: 1}, Rates{Kind: KindSGLang, Servers: 1}
	if got := Sum([]Rates{a, b}).Kind; got != KindSGLang {
		t.Errorf("same kinds sum to %q", got)
	}
	b.Kind = KindVLLM
	if got := Sum([]Rates{a, b}).Kind; got != KindUnknown {
		t.Errorf("mixed kinds sum to %q, want unknown", got)
	}
	if got := Sum(nil); got.Servers != 0 {
		t.Errorf("Sum(nil) = %+v", got)
	}
}

// llama-server started without --metrics answers 501 with what to do: the
// scrape error passes the body's message on, and errors.As sees the status.
func TestScraperPassesErrorBodyOn(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/llama/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusNotImplemented)
		fmt.Fprint(w, `{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `+"`--metrics`"+`","type":"not_supported_error"}}`)
	})
	mux.HandleFunc("/fastapi/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	})
	mux.HandleFunc("/html/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tests := []struct {
		path   string
		status int
		msg    string
	}{
		{"/llama/metrics", 501, "This server does not support metrics endpoint. Start it with `--metrics`"},
		{"/fastapi/metrics", 404, "Not Found"},
		{"/html/metrics", 502, ""},
	}
	for _, tc := range tests {
		_, err := NewScraper(srv.URL+tc.path, nil).Scrape(context.Background())
		var se *StatusError
		if !errors.As(err, &se) || se.Status != tc.status || se.Message != tc.msg {
			t.Fatalf("%s: err = %#v, want status %d message %q", tc.path, err, tc.status, tc.msg)
		}
		if !strings.Contains(err.Error(), srv.URL+tc.path) || !strings.HasSuffix(err.Error(), tc.msg) {
			t.Errorf("%s: %q", tc.path, err)
		}
	}
}

func TestScraperKinds(t *testing.T) {
	for _, file := range []string{"sglang.prom", "llamacpp-server.prom"} {
		text := readTestdata(t, file)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, text) }))
		s, err := NewScraper(srv.URL+"/metrics", nil).Scrape(context.Background())
		srv.Close()
		if err != nil || !s.Kind.Known() {
			t.Errorf("%s: kind %q, %v", file, s.Kind, err)
		}
	}
}

func TestBodyMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"code":501,"message":"Start it with --metrics","type":"not_supported_error"}}`, "Start it with --metrics"},
		{`{"object":"error","message":"bad","type":"BadRequestError","code":400}`, "bad"},
		{`{"error":"no such route"}`, "no such route"},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"other":1}`, ""},
		{"404 page not found\nmore", "404 page not found"},
		{"  <!DOCTYPE html><html>...", ""},
		{"", ""},
		{"tab\tand \x1b[31mred\x1b[0m  spaces", "tab and [31mred[0m spaces"},
		{strings.Repeat("a", 400), strings.Repeat("a", maxMessage) + "..."},
		// A space folded in at the bound used to step past it, and
		// nothing after was cut (FuzzBodyMessage's seed 9bb898f65b6c0239).
		{strings.Repeat("a", maxMessage-1) + " " + strings.Repeat("b", 400), strings.Repeat("a", maxMessage-1) + "..."},
		{strings.Repeat("a", maxMessage-2) + " b c", strings.Repeat("a", maxMessage-2) + " b..."},
	}
	for _, tc := range tests {
		if got := BodyMessage([]byte(tc.body)); got != tc.want {
			t.Errorf("BodyMessage(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// A server's error body reaches a terminal: whatever it holds, the message
// has no control character and is bounded.
func FuzzBodyMessage(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"x\u001b[2J"}}`))
	f.Add([]byte("plain\r\ntext"))
	f.Add([]byte(`{"detail":[{"loc":["body"]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := BodyMessage(body)
		if !utf8.ValidString(msg) || utf8.RuneCountInString(msg) > maxMessage+3 {
			t.Fatalf("message %q", msg)
		}
		for _, r := range msg {
			if unicode.IsControl(r) {
				t.Fatalf("control character %U in %q", r, msg)
			}
		}
	})
}
