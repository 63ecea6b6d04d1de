package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// The names the CLI tests use for what the runner writes.
const (
	statusFile       = runfiles.StatusFile
	reportFile       = runfiles.ReportFile
	stateRunning     = runfiles.StateRunning
	stateDraining    = runfiles.StateDraining
	stateDone        = runfiles.StateDone
	stateInterrupted = runfiles.StateInterrupted
	stateFailed      = runfiles.StateFailed
)

// lockedBuffer is a bytes.Buffer the run may write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inProcessRun is `synthgen run ARGS...` running in a goroutine of the test.
type inProcessRun struct {
	stdout, stderr lockedBuffer
	done           chan struct{}
	err            error
}

func startRunInProcess(args ...string) *inProcessRun {
	r := &inProcessRun{done: make(chan struct{})}
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{"run"}, args...))
	cmd.SetOut(&r.stdout)
	cmd.SetErr(&r.stderr)
	go func() {
		defer close(r.done)
		r.err = cmd.ExecuteContext(context.Background())
	}()
	return r
}

func (r *inProcessRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end in 30 s; stderr:\n%s", r.stderr.String())
		return nil
	}
}

// writeMessagesDataset writes n one-turn prompts in the OpenAI messages shape.
func writeMessagesDataset(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"question %d: how many legs do %d spiders have?"}]}`+"\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func startStatusMock(t *testing.T, opts mockserver.Options) (*mockserver.Server, *httptest.Server) {
	t.Helper()
	m := mockserver.New(opts)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv
}

func readStatusFile(t *testing.T, path string) (runfiles.StatusRecord, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return runfiles.StatusRecord{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var st runfiles.StatusRecord
	// Atomic rewrites: every read sees a whole file, never a torn one.
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s is not whole JSON: %v\n%s", path, err, b)
	}
	return st, true
}

// waitForState polls status.json until its state is want.
func waitForState(t *testing.T, r *inProcessRun, path string, want runfiles.State) runfiles.StatusRecord {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := readStatusFile(t, path); ok && st.State == want {
			return st
		}
		select {
		case <-r.done:
			t.Fatalf("the run ended (%v) before status.json said %q; stderr:\n%s", r.err, want, r.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("status.json never said %q; stderr:\n%s", want, r.stderr.String())
	return runfiles.StatusRecord{}
}

func readReport(t *testing.T, dir string) runfiles.ReportRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep runfiles.ReportRecord
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report.json: %v\n%s", err, b)
	}
	return rep
}

var selfMetricsURLRe = regexp.MustCompile(`metrics: synthgen's own at (http://\S+/metrics)`)

// A whole run: status.json says "running" with the pid while it works and
// "done" at the end; report.json holds the final figures, which agree with
// the server's own count; --metrics-addr serves during the run and stops
// with it.
func TestRunStatusReportAndMetrics(t *testing.T) {
	t.Parallel()
	const n = 40
	mock, srv := startStatusMock(t, mockserver.Options{TokenDelay: time.Millisecond, MeanTokens: 120})
	data := writeMessagesDataset(t, n)
	dir := filepath.Join(t.TempDir(), "out")
	r := startRunInProcess("--endpoint.base_url", srv.URL+"/v1", "--dataset.path", data,
		"--output.dir", dir, "--output.format", "jsonl", "--concurrency", "4",
		"--generation.max_tokens", "300", "--progress.interval", "50ms", "--metrics-addr", "127.0.0.1:0")

	st := waitForState(t, r, filepath.Join(dir, statusFile), stateRunning)
	if st.PID != os.Getpid() || st.Event != "status" || st.OutputDir != dir || st.Total != n || st.StartedAt.IsZero() {
		t.Errorf("running status = %+v", st)
	}
	m := selfMetricsURLRe.FindStringSubmatch(r.stderr.String())
	if m == nil {
		t.Fatalf("no metrics address on stderr:\n%s", r.stderr.String())
	}
	fams := scrapeSelf(t, m[1])
	if v, ok := metricValue(fams, "synthgen_requests_planned"); !ok || v != n {
		t.Errorf("synthgen_requests_planned = %v, %v during the run, want %d", v, ok, n)
	}

	if err := r.wait(t); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, r.stderr.String())
	}
	client := &http.Client{Timeout: time.Second}
	if resp, err := client.Get(m[1]); err == nil {
		resp.Body.Close()
		t.Errorf("metrics still served after the run: %s", resp.Status)
	}

	final, _ := readStatusFile(t, filepath.Join(dir, statusFile))
	if final.State != stateDone || final.Done != n || final.InFlight != 0 {
		t.Errorf("final status = %+v", final)
	}
	rep := readReport(t, dir)
	want := mock.Stats()
	checks := []struct {
		name string
		ok   bool
	}{
		{"event report", rep.Event == "report"},
		{"state done", rep.State == stateDone},
		{"exit code 0", rep.ExitCode == 0 && rep.Error == ""},
		{"written all", rep.Written == n && rep.Done == n && rep.Total == n},
		{"tokens are the server's", rep.CompletionTokens == want.GenerationTokens && rep.CompletionTokens > 0},
		{"prompt tokens are the server's", rep.PromptTokens == want.PromptTokens},
		{"a rate", rep.TokPerS > 0 && rep.ReqPerS > 0},
		{"the server's view", rep.Server != nil},
		{"who", rep.PID == os.Getpid() && rep.OutputDir == dir},
		{"when", !rep.StartedAt.IsZero() && !rep.EndedAt.Before(rep.StartedAt) && rep.DurationS > 0},
		{"config", rep.Config.Model == mockserver.DefaultModel && rep.Config.Concurrency == 4 &&
			rep.Config.Dataset == data && rep.Config.MaxTokens == 300 && rep.Config.BaseURL == srv.URL+"/v1" &&
			rep.Config.Format == "auto" && rep.Config.Samples == 1 && rep.Config.Stream && rep.Config.OutputFormat == "jsonl" &&
			rep.Config.Shard == "" && rep.Config.Limit == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("report.json: %s: got %+v (mock %+v)", c.name, rep, want)
		}
	}

	// Runs again on the same directory: nothing to do, said in a way that
	// explains a shrunk dataset.limit.
	tests := []struct {
		name, limit, say string
	}{
		{"all", "0", fmt.Sprintf("nothing to do: all %d selected keys are already in %s\n", n, dir)},
		{"limit shrunk", "10", fmt.Sprintf("nothing to do: all 10 keys selected by dataset.limit 10 are done; %d records are in %s\n", n, dir)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// What a kill during a rewrite leaves is cleaned up.
			leftover := filepath.Join(dir, "."+statusFile+".12345.tmp")
			if err := os.WriteFile(leftover, []byte(`{"sta`), 0o644); err != nil {
				t.Fatal(err)
			}
			r := startRunInProcess("--endpoint.base_url", srv.URL+"/v1", "--dataset.path", data,
				"--output.dir", dir, "--output.format", "jsonl", "--concurrency", "4",
				"--generation.max_tokens", "300", "--dataset.limit", tc.limit)
			if err := r.wait(t); err != nil {
				t.Fatalf("run: %v\nstderr:\n%s", err, r.stderr.String())
			}
			if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("leftover %s still there (%v)", leftover, err)
			}
			if !strings.Contains(r.stderr.String(), tc.say) {
				t.Errorf("stderr does not say %q:\n%s", tc.say, r.stderr.String())
			}
			rep := readReport(t, dir)
			if rep.State != stateDone || rep.Written != 0 || fmt.Sprint(rep.Config.Limit) != tc.limit {
				t.Errorf("report after nothing to do: state %s written %d limit %v", rep.State, rep.Written, rep.Config.Limit)
			}
		})
	}
}

// The first signal drains: status.json says so while the requests in
// flight finish, and the run ends "interrupted" with exit code 130 in both
// files.
func TestRunStatusInterrupted(t *testing.T) {
	_, srv := startStatusMock(t, mockserver.Options{TokenDelay: 4 * time.Millisecond, MeanTokens: 2000})
	data := writeMessagesDataset(t, 200)
	dir := filepath.Join(t.TempDir(), "out")
	r := startRunInProcess("--endpoint.base_url", srv.URL+"/v1", "--endpoint.model", "mock-model",
		"--dataset.path", data, "--output.dir", dir, "--output.format", "jsonl", "--concurrency", "4",
		"--generation.max_tokens", "250", "--progress.interval", "50ms", "--shutdown.grace", "20s")
	path := filepath.Join(dir, statusFile)
	// Signalled with the pool full, so that there is a drain to see: a
	// signal before the first request starts ends the run at once, and a
	// loaded machine then writes "interrupted" before any poll reads
	// "draining" (seen under a parallel go test). status.json exists only
	// after run has taken the signals over, so this cannot kill the test
	// binary.
	waitInFlight(t, r, path, 4)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitForState(t, r, path, stateDraining)
	err := r.wait(t)
	if code := runExitCode(err); code != exitInterrupted {
		t.Fatalf("exit code %d (%v), want %d", code, err, exitInterrupted)
	}
	// The summary says how the run ended: 'grep ^done' must not read an
	// interrupted run as finished.
	if out := r.stdout.String(); !regexp.MustCompile(`(?m)^interrupted \d+/200 in `).MatchString(out) || regexp.MustCompile(`(?m)^done `).MatchString(out) {
		t.Errorf("stdout has no summary line starting with interrupted, or one with done:\n%s", out)
	}
	if m, err := sink.ReadManifest(dir); err != nil || m.Runs[len(m.Runs)-1].Outcome != "interrupted" {
		t.Errorf("manifest: %v, last run's outcome %q, want interrupted", err, m.Runs[len(m.Runs)-1].Outcome)
	}
	final, _ := readStatusFile(t, path)
	rep := readReport(t, dir)
	if final.State != stateInterrupted || rep.State != stateInterrupted || rep.ExitCode != exitInterrupted ||
		!strings.Contains(rep.Error, "interrupted") || rep.Done >= 200 || rep.InFlight != 0 {
		t.Errorf("after the drain: status %s, report %+v", final.State, rep)
	}
}

// Neither the API key nor a password in a URL reaches the terminal, the
// log or any file of the output directory, on success and on failure.
func TestRunNeverLeaksSecrets(t *testing.T) {
	const key, password = "sk-test-0123456789abcdef", "hunter2-pw"
	t.Setenv("SYNTHGEN_TEST_SECRET_KEY", key)
	_, srv := startStatusMock(t, mockserver.Options{})
	dead := httptest.NewServer(http.NotFoundHandler())
	deadHost := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	liveHost := strings.TrimPrefix(srv.URL, "http://")
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, `{"error":{"message":"invalid api key","type":"invalid_request_error","code":401}}`)
	}))
	defer refuse.Close()
	refuseHost := strings.TrimPrefix(refuse.URL, "http://")
	data := writeMessagesDataset(t, 5)

	tests := []struct {
		name string
		args []string
	}{
		{"success, metrics down", []string{
			"--endpoint.base_url", "http://user:" + password + "@" + liveHost + "/v1",
			"--endpoint.metrics_url", "http://user:" + password + "@" + deadHost + "/metrics"}},
		{"every request refused", []string{
			"--endpoint.base_url", "http://user:" + password + "@" + refuseHost + "/v1",
			"--endpoint.model", "m", "--retry.max_attempts", "1"}},
		{"model lookup refused", []string{
			"--endpoint.base_url", "http://user:" + password + "@" + refuseHost + "/v1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := append([]string{"--dataset.path", data, "--output.dir", dir, "--output.format", "jsonl",
				"--endpoint.api_key_env", "SYNTHGEN_TEST_SECRET_KEY", "--progress.interval", "20ms"}, tc.args...)
			r := startRunInProcess(args...)
			err := r.wait(t)
			seen := r.stdout.String() + r.stderr.String()
			if err != nil {
				seen += err.Error()
				var ee *exitError
				if errors.As(err, &ee) {
					seen += ee.Hint()
				}
			}
			_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					b, _ := os.ReadFile(p)
					seen += string(b)
				}
				return nil
			})
			if !strings.Contains(seen, "user:xxxxx@") {
				t.Errorf("the redacted URL is shown nowhere; the test does not see what it checks:\n%s", seen)
			}
			for _, secret := range []string{key, password} {
				if strings.Contains(seen, secret) {
					t.Errorf("%q leaked:\n%s", secret, seen)
				}
			}
		})
	}
}

// TestVerdictAgreesWithOutcome: the exit code a run ends with is the one
// its outcome (the manifest's word, the summary's first) means: only a run
// that answered every key exits 0 and says "done".
func TestVerdictAgreesWithOutcome(t *testing.T) {
	cfg := config.Default()
	cfg.Output.Dir = t.TempDir()
	tests := []struct {
		name string
		res  generator.Result
		code int
	}{
		{"done", generator.Result{Outcome: generator.OutcomeDone, Summary: runstats.Summary{Written: 5}, OnDisk: 5}, exitOK},
		{"incomplete", generator.Result{Outcome: generator.OutcomeIncomplete, Summary: runstats.Summary{Written: 2, Failed: 3}, Failed: 3}, exitIncomplete},
		{"interrupted", generator.Result{Outcome: generator.OutcomeInterrupted, Interrupted: true, Summary: runstats.Summary{Written: 2, Drained: true}}, exitInterrupted},
		{"bad row", generator.Result{Outcome: generator.OutcomeFailed, Err: &dataset.RowError{File: "d.jsonl", Line: 3, Field: "messages", Err: errors.New("not a list")}}, exitUsage},
		{"refused", generator.Result{Outcome: generator.OutcomeFailed, Err: &autoconc.RefusedError{Err: errors.New("no metrics"), Hint: "set concurrency"}}, exitUsage},
		{"failed", generator.Result{Outcome: generator.OutcomeFailed, Err: errors.New("write record: broken")}, exitFailure},
		{"close failed", generator.Result{Outcome: generator.OutcomeFailed, CloseErr: errors.New("rename: broken")}, exitFailure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runResult(cfg, tc.res, io.Discard, io.Discard)
			if got := runExitCode(err); got != tc.code {
				t.Errorf("exit code %d (%v), want %d for outcome %s", got, err, tc.code, tc.res.Outcome)
			}
		})
	}
}

// A resumed run's status.json counts the records on disk from its first
// write, not "done 0" for the first progress.interval; and the header says
// how many keys are left, not only how many are done.
func TestRunStatusResumeKnowsWhatIsDone(t *testing.T) {
	t.Parallel()
	_, srv := startStatusMock(t, mockserver.Options{TokenDelay: 4 * time.Millisecond, MeanTokens: 2000})
	data := writeMessagesDataset(t, 30)
	dir := filepath.Join(t.TempDir(), "out")
	args := []string{"--endpoint.base_url", srv.URL + "/v1", "--endpoint.model", "mock-model",
		"--dataset.path", data, "--output.dir", dir, "--output.format", "jsonl", "--concurrency", "4",
		"--generation.max_tokens", "100", "--shutdown.grace", "20s", "--quiet"}
	first := startRunInProcess(append(args, "--dataset.limit", "10")...)
	if err := first.wait(t); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.stderr.String())
	}
	// No heartbeat of the reporter comes before the end: what status.json
	// says is the runner's own first write.
	r := startRunInProcess(append(args, "--progress.interval", "1h", "--quiet=false")...) // the start lines
	st := waitForState(t, r, filepath.Join(dir, statusFile), stateRunning)
	if err := r.wait(t); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, r.stderr.String())
	}
	if st.Done != 10 || st.AlreadyDone != 10 || st.Total != 30 {
		t.Errorf("first status.json of the resumed run: done %d/%d, already_done %d; want 10/30, 10", st.Done, st.Total, st.AlreadyDone)
	}
	if want := "resuming: 10 records already in " + dir + "; about 20 of 30 keys to go"; !strings.Contains(r.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr.String())
	}
}
