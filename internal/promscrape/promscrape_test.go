package promscrape

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseString(t *testing.T, text string, at time.Time) Sample {
	t.Helper()
	s, err := Parse(strings.NewReader(text), at)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestParseRealCaptures(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, s Sample)
	}{
		{"vllm-v1-engine-label.prom", func(t *testing.T, s Sample) {
			// Every counter is 0 on this fresh server: the *_created gauges
			// (unix timestamps near 1.78e9) must not be read as the counters.
			for _, name := range []string{MetricGenerationTokens, MetricPromptTokens, MetricRunning, MetricWaiting, MetricKVCacheUsage, MetricPreemptions} {
				if !s.Found[name] {
					t.Errorf("%s not found", name)
				}
			}
			if s.GenerationTokens != 0 || s.PromptTokens != 0 || s.Preemptions != 0 {
				t.Errorf("counters = gen %v prompt %v preempt %v, want 0 (a _created timestamp leaked in)", s.GenerationTokens, s.PromptTokens, s.Preemptions)
			}
			if !s.HasKV || s.HasSpec {
				t.Errorf("HasKV=%v HasSpec=%v, want true false", s.HasKV, s.HasSpec)
			}
		}},
		{"vllm-qwen3-0.6b-gpu-cache.prom", func(t *testing.T, s Sample) {
			if s.GenerationTokens != 4874 || s.PromptTokens != 43952 {
				t.Errorf("gen %v prompt %v, want 4874 43952", s.GenerationTokens, s.PromptTokens)
			}
			// The older KV gauge name is the fallback.
			if !s.HasKV || !s.Found[MetricGPUCacheUsage] || s.Found[MetricKVCacheUsage] {
				t.Errorf("HasKV=%v Found=%v, want the gpu_cache_usage_perc fallback", s.HasKV, s.Found)
			}
			// Histograms present (request_generation_tokens_sum is 4843) do
			// not disturb the counter.
			if s.Running != 0 || s.Waiting != 0 {
				t.Errorf("running %v waiting %v", s.Running, s.Waiting)
			}
		}},
		{"vllm-spec-decode.prom", func(t *testing.T, s Sample) {
			if !s.HasSpec {
				t.Fatal("HasSpec = false")
			}
			// Only the cumulative totals: not the per-position counters, not
			// the _created timestamps.
			if s.SpecDrafts != 2.04363e+06 || s.SpecDraftTokens != 1.0218118e+07 || s.SpecAccepted != 7.268642e+06 {
				t.Errorf("spec = %v %v %v", s.SpecDrafts, s.SpecDraftTokens, s.SpecAccepted)
			}
			if s.Found[MetricGenerationTokens] {
				t.Error("generation tokens found in a file without them")
			}
		}},
		{"vllm-ttft-histogram.prom", func(t *testing.T, s Sample) {
			if s.GenerationTokens != 11392 {
				t.Errorf("gen = %v, want 11392", s.GenerationTokens)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := parseString(t, readTestdata(t, tc.file), t0)
			if !s.At.Equal(t0) {
				t.Errorf("At = %v", s.At)
			}
			tc.check(t, s)
		})
	}
}

var engineZero = regexp.MustCompile(`engine="0"`)

// twoEngines turns a one-engine capture into the data-parallel layout the
// Python client writes: each engine="0" sample followed by its engine="1"
// twin, whose value is given by value(name, engine-0 value).
func twoEngines(text string, value func(name string, v float64) float64) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(line + "\n")
		if strings.HasPrefix(line, "#") || !engineZero.MatchString(line) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		fmt.Sscan(line[i+1:], &v)
		name := line[:strings.IndexByte(line, '{')]
		twin := engineZero.ReplaceAllString(line[:i], `engine="1"`)
		fmt.Fprintf(&b, "%s %v\n", twin, value(name, v))
	}
	return b.String()
}

func TestParseSumsEnginesAndModels(t *testing.T) {
	text := twoEngines(readTestdata(t, "vllm-v1-engine-label.prom"), func(name string, _ float64) float64 {
		switch name {
		case "vllm:generation_tokens_total":
			return 1500
		case "vllm:num_requests_running":
			return 7
		case "vllm:kv_cache_usage_perc":
			return 0.5
		}
		return 0
	})
	// A second model on the same server, engine 0.
	text += `vllm:generation_tokens_total{engine="0",model_name="other-model"} 250.0` + "\n"
	s := parseString(t, text, t0)
	if s.GenerationTokens != 1750 {
		t.Errorf("GenerationTokens = %v, want 0 + 1500 + 250", s.GenerationTokens)
	}
	if s.Running != 7 {
		t.Errorf("Running = %v, want 7", s.Running)
	}
	// Mean of engine 0 (0.0) and engine 1 (0.5): never a sum above 1.
	if s.KVCacheUsage != 0.25 {
		t.Errorf("KVCacheUsage = %v, want 0.25", s.KVCacheUsage)
	}
}

func TestParseBareCounterNames(t *testing.T) {
	// Exporters that name the sample like the family, without _total.
	s := parseString(t, "# TYPE vllm:generation_tokens counter\nvllm:generation_tokens{model_name=\"m\"} 42\n", t0)
	if !s.Found[MetricGenerationTokens] || s.GenerationTokens != 42 {
		t.Errorf("found %v value %v, want 42", s.Found, s.GenerationTokens)
	}
}

func TestParseErrorNamesLine(t *testing.T) {
	_, err := Parse(strings.NewReader("vllm:num_requests_running 1\nvllm:generation_tokens_total{engine=\"0\" 12\n"), t0)
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want one naming line 2", err)
	}
}

func sampleAt(sec float64, gen, prompt float64) Sample {
	return Sample{At: t0.Add(time.Duration(sec * float64(time.Second))), GenerationTokens: gen, PromptTokens: prompt}
}

func TestBetween(t *testing.T) {
	tests := []struct {
		name       string
		a, b       Sample
		wantGen    float64
		wantPrompt float64
	}{
		{"steady", sampleAt(0, 1000, 5000), sampleAt(10, 17000, 9000), 1600, 400},
		{"server restarted: b is the delta", sampleAt(0, 900000, 100), sampleAt(5, 2500, 50), 500, 10},
		{"idle", sampleAt(0, 10, 10), sampleAt(2, 10, 10), 0, 0},
		{"same instant: no rate", sampleAt(3, 10, 10), sampleAt(3, 20, 20), 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Between(tc.a, tc.b)
			if !near(r.GenTokPerSec, tc.wantGen) || !near(r.PromptTokPerSec, tc.wantPrompt) {
				t.Errorf("gen %v prompt %v, want %v %v", r.GenTokPerSec, r.PromptTokPerSec, tc.wantGen, tc.wantPrompt)
			}
			if r.Window != tc.b.At.Sub(tc.a.At) {
				t.Errorf("Window = %v", r.Window)
			}
		})
	}
}

// tok/s from two scrapes of real text.
func TestBetweenRealText(t *testing.T) {
	base := readTestdata(t, "vllm-qwen3-0.6b-gpu-cache.prom")
	later := strings.Replace(base, `vllm:generation_tokens_total{model_name="Qwen/Qwen3-0.6B"} 4874.0`, `vllm:generation_tokens_total{model_name="Qwen/Qwen3-0.6B"} 20874.0`, 1)
	later = strings.Replace(later, `vllm:num_preemptions_total{model_name="Qwen/Qwen3-0.6B"} 0.0`, `vllm:num_preemptions_total{model_name="Qwen/Qwen3-0.6B"} 3.0`, 1)
	a := parseString(t, base, t0)
	b := parseString(t, later, t0.Add(10*time.Second))
	r := Between(a, b)
	if r.GenTokPerSec != 1600 || r.Preemptions != 3 || !r.HasKV {
		t.Errorf("Between = %+v, want 1600 tok/s, 3 preemptions, kv", r)
	}
}

func TestBetweenSpecDecode(t *testing.T) {
	a := Sample{At: t0, HasSpec: true, SpecDrafts: 1000, SpecDraftTokens: 3000, SpecAccepted: 2000}
	b := Sample{At: t0.Add(time.Second), HasSpec: true, SpecDrafts: 1100, SpecDraftTokens: 3300, SpecAccepted: 2210}
	r := Between(a, b)
	if !r.HasSpec || !near(r.AcceptanceRate, 0.7) || !near(r.MeanAcceptanceLength, 3.1) {
		t.Errorf("spec = %v rate %v len %v, want 0.7 and 1 + 210/100", r.HasSpec, r.AcceptanceRate, r.MeanAcceptanceLength)
	}
	// No draft in the window: nothing to show.
	if r := Between(b, b); r.HasSpec {
		t.Errorf("idle window HasSpec = true (%+v)", r)
	}
	// From the real capture: acceptance over the server's whole life.
	s := parseString(t, readTestdata(t, "vllm-spec-decode.prom"), t0)
	zero := Sample{At: t0.Add(-time.Hour), HasSpec: true}
	r = Between(zero, s)
	if !near(r.AcceptanceRate, 7.268642e+06/1.0218118e+07) || !near(r.MeanAcceptanceLength, 1+7.268642e+06/2.04363e+06) {
		t.Errorf("real capture: rate %v len %v", r.AcceptanceRate, r.MeanAcceptanceLength)
	}
}

func TestMetricsURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "http://host:8000/v1", want: "http://host:8000/metrics"},
		{in: "http://host:8000/v1/", want: "http://host:8000/metrics"},
		{in: "http://host:8000", want: "http://host:8000/metrics"},
		{in: "http://host:8000/", want: "http://host:8000/metrics"},
		{in: "https://gpu.example/metrics", want: "https://gpu.example/metrics"},
		{in: "http://127.0.0.1:8000/v1?x=1#f", want: "http://127.0.0.1:8000/metrics"},
		{in: "http://proxy/vllm/v1", want: "http://proxy/vllm/metrics"},
		{in: " http://host:8000/v1 ", want: "http://host:8000/metrics"},
		{in: "host:8000", err: "want http(s)://"},
		{in: "localhost:8000/v1", err: "want http(s)://"},
		{in: "", err: "want http(s)://"},
		{in: "ftp://host/v1", err: "want http(s)://"},
		{in: "http://[::1", err: "metrics url"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := MetricsURL(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("MetricsURL(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("MetricsURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestScraper(t *testing.T) {
	real := readTestdata(t, "vllm-v1-engine-label.prom")
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Accept"); !strings.HasPrefix(got, "text/plain") {
			http.Error(w, "unexpected Accept "+got, http.StatusNotAcceptable)
			return
		}
		fmt.Fprint(w, real)
	})
	mux.HandleFunc("/other/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE go_goroutines gauge\ngo_goroutines 12\n")
	})
	mux.HandleFunc("/broken/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "vllm:num_requests_running{ 1\n")
	})
	mux.HandleFunc("/slow/metrics", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	tests := []struct {
		name string
		url  string
		err  string
	}{
		{"vllm", srv.URL + "/metrics", ""},
		{"not found", srv.URL + "/nothing/metrics", "404"},
		{"no known kind", srv.URL + "/other/metrics", "no vLLM, SGLang or llama.cpp metrics"},
		{"malformed", srv.URL + "/broken/metrics", "line 1"},
		{"down", downURL + "/metrics", "connect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewScraper(tc.url, nil).Scrape(context.Background())
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !s.Found[MetricGenerationTokens] || s.At.IsZero() {
					t.Errorf("sample = %+v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.url) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, tc.url, tc.err)
			}
		})
	}
	t.Run("caller deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := NewScraper(srv.URL+"/slow/metrics", nil).Scrape(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			t.Fatalf("err = %v after %v, want a prompt deadline error", err, time.Since(start))
		}
	})
}

// Outside input: no panic, and an error names its line.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"vllm-v1-engine-label.prom", "vllm-spec-decode.prom", "vllm-ttft-histogram.prom", "sglang.prom", "llamacpp-spec-decode.prom"} {
		f.Add(readTestdata(f, name))
	}
	f.Add("vllm:num_requests_running{engine=\"0\"} NaN\n")
	f.Add("# TYPE x histogram\nx_bucket{le=\"+Inf\"} 1\nx_count 1\n")
	f.Add("vllm:prefix_cache_queries_total 10\nvllm:prefix_cache_hits_total 30\n")
	f.Add("sglang:num_running_reqs 1\nsglang:cache_hit_rate NaN\n")
	f.Add("vllm:prefix_cache_queries_total +Inf\nvllm:prefix_cache_hits_total +Inf\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(strings.NewReader(text), t0)
		if err != nil {
			if !strings.Contains(err.Error(), "line") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		if s.Found == nil {
			t.Fatal("nil Found on success")
		}
		// A prefix-cache hit rate shown is a share, whatever the text says.
		before := Sample{At: t0.Add(-time.Second), Kind: s.Kind, HasPrefix: s.HasPrefix}
		for _, r := range []Rates{Between(s, s), Between(before, s)} {
			if r.HasPrefix && !(r.PrefixHitRate >= 0 && r.PrefixHitRate <= 1) {
				t.Fatalf("hit rate %v shown from %q", r.PrefixHitRate, text)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	text := readTestdata(b, "vllm-qwen3-0.6b-gpu-cache.prom")
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		if _, err := Parse(strings.NewReader(text), t0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPreemptionsOnlyWhenReported: a server without a preemption counter
// (llama.cpp has none) reports no preemptions, not zero of them.
func TestPreemptionsOnlyWhenReported(t *testing.T) {
	t0 := time.Unix(100, 0)
	without := "vllm:generation_tokens_total 10\nvllm:num_requests_running 2\n"
	with := without + "vllm:num_preemptions_total 3\n"
	a, err := Parse(strings.NewReader(without), t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(strings.NewReader(with), t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if a.HasPreemptions || !b.HasPreemptions {
		t.Fatalf("HasPreemptions %v without the counter and %v with it", a.HasPreemptions, b.HasPreemptions)
	}
	if r := Between(a, b); r.HasPreemptions {
		t.Errorf("a window whose first sample had no counter has preemptions %v", r.Preemptions)
	}
	if r := Between(b, b); !r.HasPreemptions {
		t.Error("a window with the counter at both ends has none")
	}
}
