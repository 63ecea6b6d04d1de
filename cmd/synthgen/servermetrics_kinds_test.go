package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/mockserver"
)

// TestRunServerViewKinds: a run against SGLang or llama.cpp (the mock in
// their flavours) shows the server's view from their own metric names: the
// progress line names the server, status.json's server section has its
// figures and its kind, what llama.cpp does not report is said once, and
// llama-server's context (meta.n_ctx) reaches the job.
func TestRunServerViewKinds(t *testing.T) {
	t.Parallel() // its own mocks, directories and processes
	tests := []struct {
		flavor, kind, name string
		lacks              string
	}{
		{mockserver.FlavorSGLang, "sglang", "SGLang", ""},
		{mockserver.FlavorLlamaCpp, "llamacpp", "llama.cpp", "metrics: llama.cpp's /metrics has no KV-cache usage nor preemptions; the server's view shows what it reports"},
	}
	for _, tc := range tests {
		t.Run(tc.flavor, func(t *testing.T) {
			const n = 120
			_, srv := startStatusMock(t, mockserver.Options{Flavor: tc.flavor, TokenDelay: 2 * time.Millisecond, MeanTokens: 100, MaxModelLen: 4096})
			dir := filepath.Join(t.TempDir(), "out")
			r := startRunInProcess("--endpoint.base_url", srv.URL+"/v1", "--dataset.path", writeMessagesDataset(t, n),
				"--output.dir", dir, "--output.format", "jsonl", "--concurrency", "8",
				"--generation.max_tokens", "300", "--progress.interval", "50ms")
			status := filepath.Join(dir, statusFile)
			// Polled until the server's view shows tokens; the run's end
			// is the failure bound.
			for {
				st, ok := readStatusFile(t, status)
				if ok && st.Server != nil && st.Server.GenTokPerS > 0 {
					if st.Server.Kind != tc.kind {
						t.Errorf("status.json server kind %q, want %q", st.Server.Kind, tc.kind)
					}
					if lacksKV := st.Server.KVCacheUsage == nil; lacksKV != (tc.lacks != "") || (st.Server.Preemptions == nil) != lacksKV {
						t.Errorf("status.json server %+v: want KV and preemptions exactly when %s reports them", st.Server, tc.name)
					}
					break
				}
				select {
				case <-r.done:
					t.Fatalf("the run ended (%v) before status.json showed the server's tok/s; stdout:\n%s\nstderr:\n%s", r.err, r.stdout.String(), r.stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			if err := r.wait(t); err != nil {
				t.Fatalf("run: %v\nstderr:\n%s", err, r.stderr.String())
			}
			out := r.stdout.String() + r.stderr.String()
			if !strings.Contains(out, "| server "+tc.name+" ") {
				t.Errorf("no progress line with the server's view named %s:\n%s", tc.name, out)
			}
			if tc.lacks != "" && strings.Count(out, tc.lacks) != 1 {
				t.Errorf("want %q said once:\n%s", tc.lacks, out)
			}
			if strings.Contains(out, "not showing the server's view") || strings.Contains(out, "no vLLM") {
				t.Errorf("the run did not read %s's metrics:\n%s", tc.name, out)
			}
			if !strings.Contains(r.stderr.String(), "model context: max_model_len 4096 tokens") {
				t.Errorf("the job does not know the context:\n%s", r.stderr.String())
			}
		})
	}
}

// TestRunReasoningHintPerServer: a run against a llama-server without a
// reasoning format is told llama-server's switch, not vLLM's; the server
// is known from /v1/models.
func TestRunReasoningHintPerServer(t *testing.T) {
	m := mockserver.New(mockserver.Options{Flavor: mockserver.FlavorLlamaCpp, MeanTokens: 16, Seed: 7, ReasoningField: mockserver.FieldNone})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	cj := cliJob{baseURL: ts.URL + "/v1", data: cliDataset(t, 25, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args()...)
	r.ok(t, "llama.cpp without a reasoning format")
	if !strings.Contains(r.stderr, "start llama-server with --reasoning-format deepseek") || strings.Contains(r.stderr, "--reasoning-parser") {
		t.Errorf("stderr, want llama-server's switch alone:\n%s", r.stderr)
	}
	st := readStatus(t, cj.dir)
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "--reasoning-format deepseek") {
		t.Errorf("status.json warnings %q", st.Warnings)
	}
}
