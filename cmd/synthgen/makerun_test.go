package main

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/config"
)

// makeRun runs the Makefile's own `run` recipe in a copy of the sample's
// files (dir/examples), with the test's binary as BIN and the build target
// taken as done (-o build), plus vars; it returns make's exit code and its
// output. A receive on abort (nil: none) or two minutes (a safety net, not
// a measure: the run takes seconds) kill make with all it started, and
// fail the test. It skips when there is no make.
func makeRun(t *testing.T, dir string, abort <-chan string, vars ...string) (int, string) {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	for _, f := range []string{"sample.yaml", "data/sample.jsonl"} {
		b, err := os.ReadFile(filepath.Join("../../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "examples", f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	makefile, err := filepath.Abs("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-s", "-C", dir, "-f", makefile, "-o", "build", "run", "BIN=" + synthgenBinary(t)}, vars...)
	cmd := exec.Command(mk, args...)
	cmd.Env = childEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A group of its own, so that a kill reaches the mock and the run too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var why string
	select {
	case err = <-done:
	case why = <-abort:
	case <-time.After(2 * time.Minute):
		why = "make run did not end within 2 minutes"
	}
	if why != "" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%s; make run's output:\n%s", why, out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("make run: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestMakeRunTalksOnlyToItsOwnMock: with the sample config's usual port
// (examples/sample.yaml's endpoint.base_url) held by another process, `make
// run` sends that process nothing and still leaves the sample's 300
// complete records in out/sample.
func TestMakeRunTalksOnlyToItsOwnMock(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(nil, "../../examples/sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Endpoint.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", u.Host)
	if errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("%s is held by another process already; this test needs to hold it itself", u.Host)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The first request to arrive ends the test: a run sent here would
	// retry this process's 503s for as long as its retries last.
	got := make(chan string, 1)
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- "the process holding " + u.Host + " got " + r.Method + " " + r.URL.Path:
		default:
		}
		http.Error(w, "not the mock", http.StatusServiceUnavailable)
	}), ReadHeaderTimeout: time.Minute}
	go func() { _ = other.Serve(ln) }()
	t.Cleanup(func() { _ = other.Close() })

	dir := t.TempDir()
	code, out := makeRun(t, dir, got)
	if code != 0 {
		t.Fatalf("make run exited %d:\n%s", code, out)
	}
	inv, err := readInventory(filepath.Join(dir, "out", "sample"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Records) != 300 || len(inv.Temps) > 0 || inv.Errors > 0 {
		t.Fatalf("out/sample: %d records, temporaries %v, %d errors; want 300 records and nothing else:\n%s",
			len(inv.Records), inv.Temps, inv.Errors, out)
	}
	for k, r := range inv.Records {
		if r.Content == "" || (r.FinishReason != "stop" && r.FinishReason != "length") {
			t.Fatalf("record %v is not a complete answer: %+v", k, r)
		}
	}
}

// TestMakeRunWithoutItsMockSendsNothing: when the mock cannot listen, `make
// run` says so, starts no run (no out/sample) and fails.
func TestMakeRunWithoutItsMockSendsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out := makeRun(t, dir, nil, "MOCK_ADDR=127.0.0.1:99999")
	if code == 0 || !strings.Contains(out, "the mock server did not start") {
		t.Errorf("make run exited %d without its mock; want a failure that says the mock did not start:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("make run without its mock made %s/out (%v): a run started", dir, err)
	}
}
