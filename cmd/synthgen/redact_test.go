package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAPIKeyNeverLeaks: a server (or proxy) that repeats the Authorization
// header in its 401 and 500 bodies, in a header and in a stream's error
// event puts the key nowhere: not on stdout or stderr, not in the error
// the run ends with, not in any file of the output directory, not in what
// inspect prints.
func TestAPIKeyNeverLeaks(t *testing.T) {
	const key = "sk-test-4f9a1c2e8b7d6a5f"
	t.Setenv("OPENAI_API_KEY", key)
	var modelsEcho atomic.Bool
	// synthgen's own /metrics (--metrics-addr), scraped by the server while
	// the run is on, once every other kind of answer was given.
	metricsAddr := freeAddr(t)
	var metricsPage atomic.Value
	_, url := cliMock(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			if auth != "Bearer "+key && strings.HasPrefix(r.URL.Path, "/v1/") {
				t.Errorf("the server got Authorization %q", auth)
			}
			w.Header().Set("X-Echo-Authorization", auth)
			if r.URL.Path == "/v1/models" && modelsEcho.Load() {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","code":401}}`, auth)
				return
			}
			if r.URL.Path != "/v1/chat/completions" {
				next.ServeHTTP(w, r)
				return
			}
			body, _ := io.ReadAll(r.Body)
			switch {
			case bytes.Contains(body, []byte(`"question 1"`)):
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"error":{"message":"bad header %q","code":401}}`, auth)
			case bytes.Contains(body, []byte(`"question 2"`)):
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, "<html>proxy error; request headers: Authorization: %s</html>", auth)
			case bytes.Contains(body, []byte(`"question 3"`)):
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: {\"error\":{\"message\":\"engine failed for %s\"}}\n\n", auth)
			default:
				if metricsPage.Load() == nil && bytes.Contains(body, []byte(`"question 5"`)) {
					if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
						page, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						metricsPage.Store(string(page))
					}
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				next.ServeHTTP(w, r)
			}
		})
	})
	cj := cliJob{baseURL: url, data: cliDataset(t, 6, 0), dir: filepath.Join(t.TempDir(), "out")}
	leaks := func(what, text string) {
		t.Helper()
		if strings.Contains(text, key) {
			t.Errorf("the key is in %s:\n%s", what, text)
		}
	}

	r := cliRun(t, cj.args("--metrics-addr", metricsAddr, "--concurrency", "1")...)
	if exitCode(r.err) != exitIncomplete {
		t.Fatalf("exit %d (%v), want %d\nstderr:\n%s", exitCode(r.err), r.err, exitIncomplete, r.stderr)
	}
	errs := cliErrors(t, cj.dir)
	if len(errs) != 3 {
		t.Fatalf("error records %+v, want 3 (questions 1, 2, 3)", errs)
	}
	for _, e := range errs {
		if !strings.Contains(e.Message, "[redacted]") {
			t.Errorf("error record %+v: the message does not show where the key was", e)
		}
	}
	leaks("stdout", r.stdout)
	leaks("stderr", r.stderr)
	leaks("the run's error", r.err.Error()+r.hint())
	err := filepath.WalkDir(cj.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		leaks(path, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := metricsPage.Load().(string)
	if !strings.Contains(page, "synthgen_requests_failed_total") {
		t.Errorf("--metrics-addr was not scraped during the run: %q", page)
	}
	leaks("--metrics-addr", page)
	out, _ := runInspectCmd(t, cj.dir)
	leaks("inspect", out)
	if !strings.Contains(out, "[redacted]") && !strings.Contains(out, "http_401") {
		t.Logf("inspect output:\n%s", out)
	}

	// At start, the model check's refusal is what the person reads.
	modelsEcho.Store(true)
	r = cliRun(t, cliJob{baseURL: url, data: cj.data, dir: filepath.Join(t.TempDir(), "out")}.args()...)
	if r.err == nil {
		t.Fatal("a 401 on /v1/models did not stop the run")
	}
	leaks("the refused start's error", r.err.Error()+r.hint())
	leaks("the refused start's stderr", r.stderr+r.stdout)
	if !strings.Contains(r.err.Error(), "[redacted]") {
		t.Errorf("the refused start's error %q does not show the server's message", r.err)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
