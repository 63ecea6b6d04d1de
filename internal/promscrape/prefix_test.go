package promscrape

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func vllmPrefix(queries, hits float64) string {
	return "vllm:num_requests_running 1\n" +
		"vllm:prefix_cache_queries_total " + ftoa(queries) + "\n" +
		"vllm:prefix_cache_hits_total " + ftoa(hits) + "\n"
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// The hit rate is the window's tokens found over those looked up; a
// window with more found than looked up cannot be true and is not shown;
// a capture with the counters (at 0) reads them.
func TestPrefixHitRate(t *testing.T) {
	a := parseString(t, vllmPrefix(1000, 200), t0)
	b := parseString(t, vllmPrefix(3000, 1700), t0.Add(time.Second))
	if !a.HasPrefix || !b.HasPrefix {
		t.Fatal("prefix counters not read")
	}
	r := Between(a, b)
	if !r.HasPrefix || !near(r.PrefixHitRate, 0.75) {
		t.Fatalf("hit rate %v (has %v), want 0.75", r.PrefixHitRate, r.HasPrefix)
	}
	if r := Between(b, parseString(t, vllmPrefix(3100, 1900), t0.Add(2*time.Second))); r.HasPrefix {
		t.Fatalf("200 found of 100 looked up shown as %v", r.PrefixHitRate)
	}
	if r := Between(b, b); r.HasPrefix {
		t.Fatal("a window with nothing looked up has a hit rate")
	}
	if s := parseString(t, readTestdata(t, "vllm-v1-engine-label.prom"), t0); !s.HasPrefix {
		t.Fatal("the vLLM V1 capture's prefix counters not read")
	}
}

// SGLang reports a rate, read at the later sample; one outside 0..1 is
// left out.
func TestPrefixSGLangRate(t *testing.T) {
	s := parseString(t, readTestdata(t, "sglang.prom"), t0)
	if !s.HasPrefixRate || !near(s.PrefixRate, 0.31) {
		t.Fatalf("sglang:cache_hit_rate read as %v (has %v), want 0.31", s.PrefixRate, s.HasPrefixRate)
	}
	if r := Between(s, s); !r.HasPrefix || !near(r.PrefixHitRate, 0.31) {
		t.Fatalf("rates' hit rate %v, want 0.31", r.PrefixHitRate)
	}
	bad := parseString(t, "sglang:num_running_reqs 1\nsglang:cache_hit_rate 1.7\n", t0)
	if bad.HasPrefixRate {
		t.Fatal("a hit rate of 1.7 was taken")
	}
}

// Summed over replicas, the rate is that of all tokens looked up.
func TestPrefixSum(t *testing.T) {
	sum := Sum([]Rates{
		{HasPrefix: true, PrefixQueried: 1000, PrefixHit: 900, PrefixHitRate: 0.9},
		{HasPrefix: true, PrefixQueried: 3000, PrefixHit: 300, PrefixHitRate: 0.1},
		{},
	})
	if !sum.HasPrefix || !near(sum.PrefixHitRate, 0.3) {
		t.Fatalf("summed hit rate %v, want 0.3 (1200 of 4000)", sum.PrefixHitRate)
	}
}

// A figure that cannot be true says why, so that it is said once.
func TestPrefixUntrueSaysWhy(t *testing.T) {
	a := parseString(t, vllmPrefix(100, 0), t0)
	b := parseString(t, vllmPrefix(200, 300), t0.Add(time.Second))
	if r := Between(a, b); r.HasPrefix || r.PrefixUntrue == "" {
		t.Fatalf("300 found of 100 looked up: has %v, why %q", r.HasPrefix, r.PrefixUntrue)
	}
	s := parseString(t, "sglang:num_running_reqs 1\nsglang:cache_hit_rate -0.5\n", t0)
	if r := Between(s, s); r.HasPrefix || !strings.Contains(r.PrefixUntrue, "sglang:cache_hit_rate") {
		t.Fatalf("a rate of -0.5: has %v, why %q", r.HasPrefix, r.PrefixUntrue)
	}
}
