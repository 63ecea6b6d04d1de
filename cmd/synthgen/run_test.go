package main

import (
	"bufio"
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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// These tests run `synthgen run` in-process (newRootCmd + ExecuteContext)
// against an in-process mock, as a person would run it again and again on
// one output directory, and assert what that person sees: the exit code,
// the message, and the records on disk.

// cliBuffer is an io.Writer safe for the goroutines that print during a run.
type cliBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *cliBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *cliBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// cliJob is one output directory, dataset and server that runs share.
type cliJob struct {
	baseURL string // http://127.0.0.1:PORT/v1
	data    string
	dir     string
}

// args are the flags every run of the job passes, then extra (a flag given
// twice takes its last value).
func (j cliJob) args(extra ...string) []string {
	return append([]string{"run",
		"--endpoint.base_url", j.baseURL,
		"--dataset.path", j.data,
		"--output.dir", j.dir,
		"--output.format", "jsonl",
		"--output.shard_size", "16",
		"--output.sync_interval", "20ms",
		"--concurrency", "8",
		"--generation.max_tokens", "64",
		"--retry.max_attempts", "3",
		"--retry.initial_backoff", "1ms",
		"--retry.max_backoff", "5ms",
		"--progress.interval", "50ms",
		"--quiet",
	}, extra...)
}

// cliResult is what one `synthgen ...` printed and returned.
type cliResult struct {
	stdout, stderr string
	err            error
	took           time.Duration
}

// cliRun runs synthgen with args in-process, within 3 minutes: a bound
// for a hang, not a wait (beside two busy loops, with the package's other
// tests running under -race, an export of 135 rows took over 30 s).
func cliRun(t *testing.T, args ...string) cliResult {
	t.Helper()
	return cliRunFor(t, 3*time.Minute, args...)
}

// cliRunFor is cliRun with another bound.
func cliRunFor(t *testing.T, d time.Duration, args ...string) cliResult {
	t.Helper()
	var stdout, stderr cliBuffer
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{}, args...)) // never nil: cobra reads os.Args for nil
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := cmd.ExecuteContext(ctx)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), err: err, took: time.Since(start)}
}

// ok fails the test when the run returned an error.
func (r cliResult) ok(t *testing.T, what string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: exit %d: %v\nstderr:\n%s", what, exitCode(r.err), r.err, r.stderr)
	}
}

// hint is the hint main would print under the error.
func (r cliResult) hint() string {
	var he interface{ Hint() string }
	if errors.As(r.err, &he) {
		return he.Hint()
	}
	return ""
}

// cliDataset writes n one-turn prompts "question I" in the messages shape;
// badLine (1-based, 0 = none) is replaced by a row whose messages is not a
// list.
func cliDataset(t *testing.T, n, badLine int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		if i+1 == badLine {
			b.WriteString(`{"messages": 42}` + "\n")
			continue
		}
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"question %d"}]}`+"\n", i)
	}
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// cliMock starts the mock behind handler (nil: the mock itself).
func cliMock(t *testing.T, wrap func(http.Handler) http.Handler) (*mockserver.Server, string) {
	t.Helper()
	m := mockserver.New(mockserver.Options{MeanTokens: 16, Seed: 7})
	var h http.Handler = m
	if wrap != nil {
		h = wrap(m)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return m, ts.URL + "/v1"
}

// cliRecords counts each id's records in the final shards of DIR/data, and
// fails on a record that is not a whole answer.
func cliRecords(t *testing.T, dir string) map[string]int {
	t.Helper()
	return countJSONL(t, filepath.Join(dir, "data"), func(line []byte) (string, error) {
		var r sink.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return "", err
		}
		if r.FinishReason == "" || r.Content == "" && r.Reasoning == "" {
			return "", fmt.Errorf("record %s is not a whole answer: %+v", r.ID, r)
		}
		return r.ID, nil
	})
}

// cliErrors reads the error records of DIR/errors.
func cliErrors(t *testing.T, dir string) []sink.ErrorRecord {
	t.Helper()
	var out []sink.ErrorRecord
	countJSONL(t, filepath.Join(dir, "errors"), func(line []byte) (string, error) {
		var e sink.ErrorRecord
		if err := json.Unmarshal(line, &e); err != nil {
			return "", err
		}
		out = append(out, e)
		return e.ID, nil
	})
	return out
}

func countJSONL(t *testing.T, dir string, id func([]byte) (string, error)) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for n := 1; sc.Scan(); n++ {
			k, err := id(sc.Bytes())
			if err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			seen[k]++
		}
		fh.Close()
	}
	return seen
}

// wantIDs asserts that the ids on disk are exactly want, each once.
func wantIDs(t *testing.T, what string, got map[string]int, want ...string) {
	t.Helper()
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("%s: id %s on disk %d times, want once", what, id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d distinct ids on disk, want %d", what, len(got), len(want))
	}
}

func idRange(from, to int) []string {
	var ids []string
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprint(i))
	}
	return ids
}

// TestRunLimitGrowsAndShrinks: growing dataset.limit requests only the new
// rows; shrinking it requests nothing, keeps what is there, exits 0 and
// says there is nothing to do.
func TestRunLimitGrowsAndShrinks(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 60, 0), dir: filepath.Join(t.TempDir(), "out")}

	r := cliRun(t, cj.args("--dataset.limit", "20")...)
	r.ok(t, "limit 20")
	if got := m.Stats().Requests; got != 20 {
		t.Errorf("limit 20: %d requests, want 20", got)
	}
	wantIDs(t, "limit 20", cliRecords(t, cj.dir), idRange(0, 20)...)
	if !strings.Contains(r.stdout, "done 20/20") {
		t.Errorf("limit 20: the summary on stdout does not say done 20/20:\n%s", r.stdout)
	}
	t.Logf("limit 20: %v", r.took)

	before := m.Stats().Requests
	r = cliRun(t, cj.args("--dataset.limit", "50", "--quiet=false")...) // the start lines
	r.ok(t, "limit 50")
	if got := m.Stats().Requests - before; got != 30 {
		t.Errorf("limit 20 -> 50: %d requests, want only the 30 new rows", got)
	}
	wantIDs(t, "limit 50", cliRecords(t, cj.dir), idRange(0, 50)...)
	if !strings.Contains(r.stderr, "resuming: 20 records") {
		t.Errorf("limit 50: stderr does not say it resumes from 20 records:\n%s", r.stderr)
	}
	t.Logf("limit 50: %v", r.took)

	before = m.Stats().Requests
	r = cliRun(t, cj.args("--dataset.limit", "10", "--quiet=false")...)
	r.ok(t, "limit 10")
	if got := m.Stats().Requests - before; got != 0 {
		t.Errorf("limit 50 -> 10: %d requests, want none", got)
	}
	wantIDs(t, "limit 10", cliRecords(t, cj.dir), idRange(0, 50)...)
	var said string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, "nothing to do") {
			said = line
		}
	}
	switch {
	case said == "":
		t.Errorf("limit 10: stderr does not say there is nothing to do:\n%s", r.stderr)
	case !strings.Contains(said, "50"):
		t.Errorf("limit 10: %q does not say the 50 records on disk are kept", said)
	default:
		t.Logf("limit 10 says: %s", said)
	}
	t.Logf("limit 10: %v", r.took)
}

// TestRunRefusesChangedSamplingParameter: resuming with another
// temperature would mix two jobs in one dataset, so it is refused (exit 2)
// with the key, both values and the way out named; --force goes on and the
// manifest remembers that run was forced.
func TestRunRefusesChangedSamplingParameter(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 10, 0), dir: filepath.Join(t.TempDir(), "out")}

	cliRun(t, cj.args("--dataset.limit", "5", "--generation.temperature", "0.6")...).ok(t, "temperature 0.6")

	before := m.Stats().Requests
	r := cliRun(t, cj.args("--dataset.limit", "5", "--generation.temperature", "0.9")...)
	if code := exitCode(r.err); code != exitUsage {
		t.Fatalf("temperature 0.6 -> 0.9: exit %d (%v), want %d", code, r.err, exitUsage)
	}
	msg := r.err.Error() + "\n" + r.hint()
	for _, want := range []string{"generation.temperature", "0.6", "0.9", "--force"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not mention %q:\n%s", want, msg)
		}
	}
	if got := m.Stats().Requests - before; got != 0 {
		t.Errorf("the refused run sent %d requests", got)
	}
	t.Logf("refused: %s", msg)

	before = m.Stats().Requests
	r = cliRun(t, cj.args("--dataset.limit", "8", "--generation.temperature", "0.9", "--force")...)
	r.ok(t, "--force")
	if got := m.Stats().Requests - before; got != 3 {
		t.Errorf("forced run: %d requests, want the 3 new rows", got)
	}
	wantIDs(t, "forced", cliRecords(t, cj.dir), idRange(0, 8)...)
	man, err := sink.ReadManifest(cj.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Runs) != 2 {
		t.Fatalf("manifest lists %d runs, want 2 (the refused one never opened the directory): %+v", len(man.Runs), man.Runs)
	}
	if man.Runs[0].Forced {
		t.Errorf("the first run is marked forced")
	}
	last := man.Runs[1]
	if !last.Forced || !strings.Contains(strings.Join(last.Notes, "\n"), "generation.temperature: 0.6 -> 0.9") {
		t.Errorf("forced run recorded as forced=%v notes=%q; want forced with generation.temperature: 0.6 -> 0.9", last.Forced, last.Notes)
	}
	stored, err := job.ManifestJob(cj.dir, man.Job, man.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Sampling.Temperature; got != 0.9 {
		t.Errorf("manifest job temperature %v, want the forced run's 0.9", got)
	}
}

// TestRunUnknownConfigKey: a typo in the config file stops the run before
// anything starts, naming the file, the key and the key it probably means.
func TestRunUnknownConfigKey(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 5, 0), dir: filepath.Join(t.TempDir(), "out")}
	cfg := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(cfg, []byte("generation:\n  max_tokens: 64\n  temprature: 0.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, cj.args("--config", cfg)...)
	if code := exitCode(r.err); code != exitUsage {
		t.Fatalf("exit %d (%v), want %d", code, r.err, exitUsage)
	}
	msg := r.err.Error()
	for _, want := range []string{cfg + ":3", "generation.temprature", `did you mean "generation.temperature"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not contain %q:\n%s", want, msg)
		}
	}
	if m.Stats().Requests != 0 {
		t.Errorf("%d requests sent despite a bad config", m.Stats().Requests)
	}
	t.Logf("refused: %s (hint: %s)", msg, r.hint())
	if _, err := os.Stat(cj.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output dir created despite a bad config (stat: %v)", err)
	}
}

// TestRunBadRowFails: with dataset.on_bad_row fail, a malformed row stops
// the run with exit 2 and file:line; the answers to the rows before it are
// kept, and a rerun with skip resumes past it.
func TestRunBadRowFails(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 10, 6), dir: filepath.Join(t.TempDir(), "out")}

	r := cliRun(t, cj.args("--dataset.on_bad_row", "fail", "--concurrency", "4")...)
	if code := exitCode(r.err); code != exitUsage {
		t.Fatalf("exit %d (%v), want %d", code, r.err, exitUsage)
	}
	if want := cj.data + ":6"; !strings.Contains(r.err.Error(), want) {
		t.Errorf("message does not name %s:\n%v", want, r.err)
	}
	wantIDs(t, "on_bad_row fail", cliRecords(t, cj.dir), idRange(0, 5)...)
	t.Logf("stopped: %v (hint: %s)", r.err, r.hint())

	before := m.Stats().Requests
	r = cliRun(t, cj.args("--dataset.on_bad_row", "skip")...)
	r.ok(t, "on_bad_row skip")
	if got := m.Stats().Requests - before; got != 4 {
		t.Errorf("rerun with skip: %d requests, want the 4 rows after the bad one", got)
	}
	wantIDs(t, "on_bad_row skip", cliRecords(t, cj.dir), append(idRange(0, 5), idRange(6, 10)...)...)
	if !strings.Contains(r.stderr, cj.data+":6") {
		t.Errorf("rerun with skip: stderr does not report the skipped row as %s:6:\n%s", cj.data, r.stderr)
	}
}

// TestRunFailedRequestThenRetryErrors: a prompt the server refuses with a
// 400 ends the run with exit 3 and a hint to --retry-errors; the others are
// answered. With --retry-errors against a server that now accepts it, it
// is answered and the run exits 0; a plain rerun then asks for nothing.
func TestRunFailedRequestThenRetryErrors(t *testing.T) {
	const badPrompt = `"question 3"`
	const serverMsg = "Unsupported value in the request: the chat template rejected the messages."
	var refuse atomic.Bool
	refuse.Store(true)
	var refused atomic.Int64
	m, url := cliMock(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/chat/completions" {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				if refuse.Load() && bytes.Contains(body, []byte(badPrompt)) {
					refused.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprintf(w, `{"object":"error","message":%q,"type":"BadRequestError","param":null,"code":400}`, serverMsg)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r)
		})
	})
	cj := cliJob{baseURL: url, data: cliDataset(t, 8, 0), dir: filepath.Join(t.TempDir(), "out")}

	r := cliRun(t, cj.args()...)
	if code := exitCode(r.err); code != exitIncomplete {
		t.Fatalf("exit %d (%v), want %d\nstderr:\n%s", code, r.err, exitIncomplete, r.stderr)
	}
	if !strings.Contains(r.hint(), "--retry-errors") {
		t.Errorf("hint %q does not mention --retry-errors (error: %v)", r.hint(), r.err)
	}
	if got := refused.Load(); got != 1 {
		t.Errorf("the 400 prompt was sent %d times, want once", got)
	}
	wantIDs(t, "with a 400", cliRecords(t, cj.dir), "0", "1", "2", "4", "5", "6", "7")
	errs := cliErrors(t, cj.dir)
	if len(errs) != 1 || errs[0].ID != "3" || errs[0].Status != 400 || errs[0].Message != serverMsg || errs[0].Cause != "http_400" || errs[0].Attempts != 1 {
		t.Errorf("error records %+v, want one for id 3: status 400, attempts 1, cause http_400, the server's message", errs)
	}
	t.Logf("exit %d: %v; hint: %s", exitCode(r.err), r.err, r.hint())

	// A rerun without --retry-errors asks nothing, and says that the
	// failed key is not done: 7/8, not 8/8, nor "nothing to do" as if all
	// were done.
	before := m.Stats().Requests
	r = cliRun(t, cj.args()...)
	if code := exitCode(r.err); code != exitIncomplete || m.Stats().Requests != before {
		t.Fatalf("rerun without --retry-errors: exit %d (%v), %d requests; want %d and none", code, r.err, m.Stats().Requests-before, exitIncomplete)
	}
	if !strings.HasPrefix(r.stdout, "incomplete 7/8 ") || !strings.Contains(r.stdout, "1 failed in earlier runs") {
		t.Errorf("rerun: summary %q, want 7/8 and 1 failed in earlier runs", r.stdout)
	}
	if strings.Contains(r.stderr, "all 8") || !strings.Contains(r.stderr, "7 selected keys are done, 1 failed for good in earlier runs") {
		t.Errorf("rerun: stderr %q, want the done and the failed keys apart", r.stderr)
	}
	if rep := readReport(t, cj.dir); rep.Done != 7 || rep.Total != 8 || rep.AlreadyDone != 7 || rep.AlreadyFailed != 1 || rep.Skipped != 7 {
		t.Errorf("rerun: report.json done %d/%d, already_done %d, already_failed %d, skipped %d; want 7/8, 7, 1, 7",
			rep.Done, rep.Total, rep.AlreadyDone, rep.AlreadyFailed, rep.Skipped)
	}

	refuse.Store(false)
	before = m.Stats().Requests
	r = cliRun(t, cj.args("--retry-errors")...)
	r.ok(t, "--retry-errors")
	if got := m.Stats().Requests - before; got != 1 {
		t.Errorf("--retry-errors: %d requests, want only the failed prompt", got)
	}
	wantIDs(t, "after --retry-errors", cliRecords(t, cj.dir), idRange(0, 8)...)

	before = m.Stats().Requests
	r = cliRun(t, cj.args("--quiet=false")...) // "nothing to do" is no summary line
	r.ok(t, "rerun")
	if got := m.Stats().Requests - before; got != 0 {
		t.Errorf("rerun after everything is done: %d requests, want none", got)
	}
	if !strings.Contains(r.stderr, "nothing to do") {
		t.Errorf("rerun: stderr does not say there is nothing to do:\n%s", r.stderr)
	}
}

// TestRunChecksTheModelFirst: a model name the server does not serve would
// turn every prompt into a 404 in DIR/errors; it is refused before anything
// is sent or created, naming what the server serves.
func TestRunChecksTheModelFirst(t *testing.T) {
	m, base := cliMock(t, nil)
	cj := cliJob{baseURL: base, data: cliDataset(t, 5, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--endpoint.model", "Qwen3-235B")...)
	if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), `"Qwen3-235B" is not served`) ||
		!strings.Contains(r.err.Error(), "mock-model") {
		t.Fatalf("exit %d, err %v; want exit 2 naming the model and what is served", exitCode(r.err), r.err)
	}
	if got := m.Stats().Requests; got != 0 {
		t.Errorf("%d chat requests sent with a model the server does not serve", got)
	}
	if _, err := os.Stat(cj.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output dir created for a run that was refused: %v", err)
	}
}

// TestRunBehindGatewayWithoutModels: a gateway that routes only chat
// answers 404 on /models; with endpoint.model set the run goes on.
func TestRunBehindGatewayWithoutModels(t *testing.T) {
	_, base := cliMock(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/models") {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	cj := cliJob{baseURL: base, data: cliDataset(t, 5, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--endpoint.model", "mock-model")...)
	r.ok(t, "run behind a gateway")
	if !strings.Contains(r.stderr, "answers 404; going on with endpoint.model") {
		t.Errorf("stderr does not say /models was skipped:\n%s", r.stderr)
	}
	wantIDs(t, "records", cliRecords(t, cj.dir), idRange(0, 5)...)
}

// TestRunInterruptedWhileWaitingForServer: Ctrl-C while synthgen waits for
// a server that is still loading stops it at once (exit 130), instead of
// being swallowed until the wait ends minutes later.
func TestRunInterruptedWhileWaitingForServer(t *testing.T) {
	var asked atomic.Int64
	loading := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, `{"object":"error","message":"loading","code":503}`, http.StatusServiceUnavailable)
	}))
	defer loading.Close()
	dir := filepath.Join(t.TempDir(), "out")
	r := startRunInProcess("--endpoint.base_url", loading.URL+"/v1", "--dataset.path", cliDataset(t, 5, 0),
		"--output.dir", dir, "--quiet")
	// run takes the signals over before it first asks for the models, so
	// once the server was asked, SIGINT reaches run, not the test binary.
	for deadline := time.Now().Add(10 * time.Second); asked.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("run never asked the server for its models")
		}
	}
	start := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := r.wait(t)
	if code := exitCode(err); code != exitInterrupted {
		t.Fatalf("exit %d (%v), want %d", code, err, exitInterrupted)
	}
	// Not the minutes of the wait: a bound no loaded machine reaches otherwise.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v to stop after SIGINT while waiting for the server", took)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output dir created by a run interrupted before it started: %v", err)
	}
}

// TestRunNamesMistypedSettings: a mistyped SYNTHGEN_* variable would
// change nothing and say nothing, and a mistyped flag gave pflag's bare
// "unknown flag": both name the nearest key, as an unknown key in the
// config file does.
func TestRunNamesMistypedSettings(t *testing.T) {
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 3, 0), dir: filepath.Join(t.TempDir(), "out")}
	t.Setenv("SYNTHGEN_CONCURENCY", "5")
	t.Setenv("SYNTHGEN_TEST_KEY_VAR", "secret") // named by endpoint.api_key_env: read
	r := cliRun(t, cj.args("--endpoint.api_key_env", "SYNTHGEN_TEST_KEY_VAR")...)
	r.ok(t, "run with a mistyped variable")
	if want := "warning: environment variable SYNTHGEN_CONCURENCY names no config key and is ignored (did you mean SYNTHGEN_CONCURRENCY?)"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	if strings.Contains(r.stderr, "SYNTHGEN_TEST_KEY_VAR") {
		t.Errorf("warned about the variable endpoint.api_key_env names:\n%s", r.stderr)
	}

	for _, c := range []struct{ flag, want string }{
		{"--concurency", "did you mean --concurrency?"},
		{"--temperature", "did you mean --generation.temperature?"},
		{"--retry-error", "did you mean --retry-errors?"},
		{"-concurrency", "did you mean --concurrency? a long flag takes two dashes"},
	} {
		r := cliRun(t, cj.args(c.flag, "5")...)
		if code := exitCode(r.err); r.err == nil || code != exitUsage {
			t.Errorf("%s: exit %d (%v), want %d", c.flag, code, r.err, exitUsage)
			continue
		}
		if !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%s: %q does not say %q", c.flag, r.err, c.want)
		}
	}
}

// TestRunSaysNoDatasetGiven: outside the repository, with no config, the
// default dataset.path (the bundled sample) is not there; the person named
// no dataset, and is told so rather than about a file they never named.
// A path set on purpose that is missing still names the path.
func TestRunSaysNoDatasetGiven(t *testing.T) {
	m, url := cliMock(t, nil)
	t.Chdir(t.TempDir())
	r := cliRun(t, "run", "--endpoint.base_url", url, "--quiet")
	if code := exitCode(r.err); r.err == nil || code != exitUsage {
		t.Fatalf("exit %d (%v), want %d", code, r.err, exitUsage)
	}
	want := "no dataset given: set dataset.path (in --config FILE, SYNTHGEN_DATASET_PATH or --dataset.path)"
	if r.err.Error() != want {
		t.Errorf("error %q, want %q", r.err, want)
	}
	if strings.Contains(r.err.Error()+r.hint(), "sample.jsonl") {
		t.Errorf("names the sample nobody asked for: %v (hint %q)", r.err, r.hint())
	}
	if _, err := os.Stat("out"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output dir created without a dataset (stat: %v)", err)
	}

	// Set on purpose, by the file, the environment or a flag: the path is named.
	cfg := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(cfg, []byte("dataset:\n  path: examples/data/sample.jsonl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--config", cfg}, {"--dataset.path", "examples/data/sample.jsonl"}} {
		r := cliRun(t, append([]string{"run", "--endpoint.base_url", url, "--quiet"}, args...)...)
		if r.err == nil || strings.Contains(r.err.Error(), "no dataset given") || !strings.Contains(r.err.Error(), "sample.jsonl") {
			t.Errorf("%v: %v, want the path named", args, r.err)
		}
	}
	if n := m.Stats().Requests; n != 0 {
		t.Errorf("%d requests sent without a dataset", n)
	}
}

// TestRunConfigFileHint: the hint under a config error fits it: a missing
// or unreadable file names no key to fix.
func TestRunConfigFileHint(t *testing.T) {
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "locked.yaml")
	if err := os.WriteFile(unreadable, []byte("concurrency: 4\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(dir, "key.yaml")
	if err := os.WriteFile(badKey, []byte("concurency: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ file, hint string }{
		{filepath.Join(dir, "missing.yaml"), "does not exist"},
		{badKey, "fix the key named above"},
	}
	if os.Geteuid() != 0 { // root reads a 0o000 file
		cases = append(cases, struct{ file, hint string }{unreadable, "cannot be read"})
	}
	denied := fmt.Errorf("read config: %w", &os.PathError{Op: "open", Path: unreadable, Err: syscall.EACCES})
	if h := configHint(denied); !strings.Contains(h, "cannot be read") {
		t.Errorf("%v: hint %q, want one saying it cannot be read", denied, h)
	}
	for _, c := range cases {
		r := cliRun(t, "run", "--config", c.file, "--quiet")
		if code := exitCode(r.err); r.err == nil || code != exitUsage {
			t.Errorf("%s: exit %d (%v), want %d", c.file, code, r.err, exitUsage)
			continue
		}
		if !strings.Contains(r.hint(), c.hint) {
			t.Errorf("%s: %v: hint %q, want one saying %q", c.file, r.err, r.hint(), c.hint)
		}
	}
}
