package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/mockserver"
)

// loadedMock is the mock with o under streaming load, behind a log of the
// samples each scrape read.
func loadedMock(t *testing.T, o mockserver.Options) (*scrapeLog, string) {
	t.Helper()
	const clients = 8
	mock := mockserver.New(o)
	log := &scrapeLog{next: mock}
	srv := httptest.NewServer(log)
	t.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); tr.CloseIdleConnections() })
	streamLoad(ctx, &wg, &http.Client{Transport: tr}, srv.URL, clients)
	deadline := time.Now().Add(10 * time.Second)
	for mock.Stats().Running < clients {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d streams running after 10 s", mock.Stats().Running, clients)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return log, srv.URL
}

// TestWatchKinds: watch given the root of an SGLang or llama.cpp server
// (the mock in their flavours) reads their own names: the line names the
// server and shows what it reports, the rate is the server's counter over
// watch's window, and what llama.cpp does not report is said once.
func TestWatchKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flavor, kind, name string
		line               *regexp.Regexp
		note               string
	}{
		{mockserver.FlavorSGLang, "sglang", "SGLang",
			regexp.MustCompile(`^SGLang [0-9.k]+ tok/s running [0-9]+ waiting [0-9]+ kv [0-9]+% preemptions 0 \([0-9]+s window, http://[^ ]+/metrics\)\n$`), ""},
		{mockserver.FlavorLlamaCpp, "llamacpp", "llama.cpp",
			regexp.MustCompile(`^llama\.cpp [0-9.k]+ tok/s running [0-9]+ waiting [0-9]+ \([0-9]+s window, http://[^ ]+/metrics\)\n$`),
			"is llama.cpp, whose /metrics has no KV-cache usage nor preemptions: the line leaves them out\n"},
	}
	for _, tc := range tests {
		t.Run(tc.flavor, func(t *testing.T) {
			log, url := loadedMock(t, mockserver.Options{Flavor: tc.flavor, TokenDelay: 5 * time.Millisecond, MeanTokens: 400})
			out, errOut, err := runWatchCmd(context.Background(), url, "--window", "300ms")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.line.MatchString(out) {
				t.Errorf("line %q, want it to match %s", out, tc.line)
			}
			if tc.note != "" && errOut != url+"/metrics "+tc.note {
				t.Errorf("stderr %q, want %q", errOut, url+"/metrics "+tc.note)
			} else if tc.note == "" && errOut != "" {
				t.Errorf("stderr %q, want nothing: %s reports every figure", errOut, tc.name)
			}

			out, _, err = runWatchCmd(context.Background(), url, "--window", "300ms", "--json")
			if err != nil {
				t.Fatal(err)
			}
			var rec runstats.ServerRecord
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			log.mu.Lock()
			a, b := log.samples[len(log.samples)-2], log.samples[len(log.samples)-1]
			log.mu.Unlock()
			if delta := b.GenerationTokens - a.GenerationTokens; delta <= 0 {
				t.Fatalf("no tokens counted between the scrapes")
			} else {
				watchSaid(t, rec, delta)
			}
			if rec.Kind != tc.kind || rec.Running != b.Running || rec.Waiting != b.Waiting {
				t.Errorf("record %+v, want kind %s and the second scrape's %v running, %v waiting", rec, tc.kind, b.Running, b.Waiting)
			}
			if tc.flavor == mockserver.FlavorLlamaCpp && (rec.KVCacheUsage != nil || rec.Preemptions != nil) {
				t.Errorf("record %+v: figures llama.cpp does not report", rec)
			}
		})
	}
}

// TestWatchMetricsOff: a llama-server started without --metrics answers
// 501 and says what to do: watch passes that on and hints at the flag; an
// SGLang without --enable-metrics has no /metrics at all.
func TestWatchMetricsOff(t *testing.T) {
	tests := []struct {
		flavor, err, hint string
	}{
		{mockserver.FlavorLlamaCpp, "501 Not Implemented: This server does not support metrics endpoint. Start it with `--metrics`", "started with --metrics"},
		{mockserver.FlavorSGLang, "404 Not Found: Not Found", "SGLang only when started with --enable-metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.flavor, func(t *testing.T) {
			srv := httptest.NewServer(mockserver.New(mockserver.Options{Flavor: tc.flavor, NoMetrics: true}))
			defer srv.Close()
			_, _, err := runWatchCmd(context.Background(), srv.URL)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitFailure {
				t.Fatalf("err = %v, want an exit 1", err)
			}
			if !strings.HasSuffix(err.Error(), tc.err) || !strings.Contains(err.Error(), srv.URL+"/metrics") || !strings.Contains(ee.Hint(), tc.hint) {
				t.Errorf("err %q hint %q, want %q and a hint with %q", err, ee.Hint(), tc.err, tc.hint)
			}
		})
	}
}
