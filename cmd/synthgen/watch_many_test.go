package main

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/runstats"
)

// TestWatchSeveralServers: several URLs (as arguments or comma-separated)
// print their sum; --each adds each server's own figures, each the
// server's counter over watch's own window.
func TestWatchSeveralServers(t *testing.T) {
	t.Parallel()
	fakes := []*fakeVLLM{{step: 5000}, {step: 1000}}
	var urls []string
	for _, f := range fakes {
		srv := httptest.NewServer(f)
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	out, _, err := runWatchCmd(context.Background(), urls[0]+","+urls[1]+"/v1", "--window", "200ms", "--json", "--each")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("--each with two servers printed %d lines, want the sum and each:\n%s", len(lines), out)
	}
	recs := make([]runstats.ServerRecord, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &recs[i]); err != nil {
			t.Fatalf("not JSON: %v: %s", err, l)
		}
	}
	sum := recs[0]
	if sum.URL != urls[0]+"/metrics,"+urls[1]+"/metrics" || sum.Running != 396 || sum.Waiting != 4 {
		t.Errorf("sum = %+v, want both URLs, 396 running, 4 waiting", sum)
	}
	var tok float64
	for i, f := range fakes {
		rec := recs[i+1]
		watchSaid(t, rec, f.lastDelta(t))
		if rec.URL != urls[i]+"/metrics" {
			t.Errorf("line %d url %q, want %s/metrics", i+2, rec.URL, urls[i])
		}
		tok += rec.GenTokPerS
	}
	if math.Abs(sum.GenTokPerS-tok) > 1e-9*tok {
		t.Errorf("sum %v tok/s, each adds up to %v", sum.GenTokPerS, tok)
	}

	text, _, err := runWatchCmd(context.Background(), urls[0], urls[1], "--window", "200ms")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^[0-9]+ tok/s running 396 waiting 4 kv 85% \([0-9]+s window, 2/2 servers\)\n$`)
	if !want.MatchString(text) {
		t.Errorf("output = %q, want it to match %s", text, want)
	}
}
