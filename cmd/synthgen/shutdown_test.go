package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// signalRun sends sig to the test binary while r runs. run takes SIGINT and
// SIGTERM over before status.json exists and gives them back only when it
// returns, so the caller waits for status.json first; a run that already
// ended would leave the signal to kill the test binary, hence the check.
func signalRun(t *testing.T, r *inProcessRun, sig syscall.Signal) {
	t.Helper()
	select {
	case <-r.done:
		t.Fatalf("the run ended (%v) before it could be sent %v; stderr:\n%s", r.err, sig, r.stderr.String())
	default:
	}
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
}

// waitInFlight polls status.json until n requests are in flight.
func waitInFlight(t *testing.T, r *inProcessRun, path string, n int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := readStatusFile(t, path); ok && st.State == stateRunning && st.InFlight == n {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("the run ended (%v) before %d requests were in flight; stderr:\n%s", r.err, n, r.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("never %d requests in flight; stderr:\n%s", n, r.stderr.String())
}

// errorRecords counts the error records under DIR/errors, open file included.
func errorRecords(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "errors", "part-*"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var e sink.ErrorRecord
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			n++
		}
	}
	return n
}

// TestRunShutdown: the two stages of shutdown, end to end in-process. The
// first SIGINT or SIGTERM drains and lets what is in flight finish; a
// second signal, or the end of shutdown.grace, cuts it. Either way the
// exit code is 130, nothing cut is written as a record or as an error, the
// output closes cleanly, and a resume completes every key exactly once.
func TestRunShutdown(t *testing.T) {
	const prompts, inFlight = 12, 4
	tests := []struct {
		name       string
		tokenDelay time.Duration // 250 tokens each: 240 ms makes a minute's answer, which a cut must not wait for
		grace      string
		signals    []syscall.Signal
		say        string        // on stderr
		within     time.Duration // from the first signal to the end
		wantCut    bool          // requests in flight were cancelled
	}{
		{"second SIGINT stops now", 240 * time.Millisecond, "1m", []syscall.Signal{syscall.SIGINT, syscall.SIGINT},
			"stopping now: requests in flight are cancelled", 20 * time.Second, true},
		{"grace expires", 240 * time.Millisecond, "300ms", []syscall.Signal{syscall.SIGINT},
			"stopping now: shutdown.grace (300ms) is over", 20 * time.Second, true},
		{"SIGTERM drains", 4 * time.Millisecond, "1m", []syscall.Signal{syscall.SIGTERM},
			"stopping: no new requests", 10 * time.Second, false},
		{"SIGTERM then SIGINT", 240 * time.Millisecond, "1m", []syscall.Signal{syscall.SIGTERM, syscall.SIGINT},
			"stopping now: requests in flight are cancelled", 20 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, slow := startStatusMock(t, mockserver.Options{TokenDelay: tc.tokenDelay, MeanTokens: 4000, Seed: 5})
			cj := cliJob{baseURL: slow.URL + "/v1", data: cliDataset(t, prompts, 0), dir: filepath.Join(t.TempDir(), "out")}
			args := cj.args("--concurrency", "4", "--generation.max_tokens", "250", "--shutdown.grace", tc.grace)
			r := startRunInProcess(args[1:]...)
			status := filepath.Join(cj.dir, statusFile)
			waitInFlight(t, r, status, inFlight)

			first := time.Now()
			signalRun(t, r, tc.signals[0])
			waitForState(t, r, status, stateDraining)
			for _, sig := range tc.signals[1:] {
				signalRun(t, r, sig)
			}
			err := r.wait(t)
			took := time.Since(first)
			if code := runExitCode(err); code != exitInterrupted {
				t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, exitInterrupted, r.stderr.String())
			}
			if took > tc.within {
				t.Errorf("took %v after the first signal, want at most %v", took, tc.within)
			}
			if !strings.Contains(r.stderr.String(), tc.say) {
				t.Errorf("stderr does not say %q:\n%s", tc.say, r.stderr.String())
			}

			// Nothing cut is on disk, as a record or an error; what was
			// written is whole (cliRecords fails on a partial answer).
			got := cliRecords(t, cj.dir)
			rep := readReport(t, cj.dir)
			if n := errorRecords(t, cj.dir); n != 0 || rep.Errors != 0 || rep.Failed != 0 {
				t.Errorf("%d error records, report errors %d error_records %d: a cut request is not a failure", n, rep.Errors, rep.Failed)
			}
			if rep.Written != len(got) || rep.State != stateInterrupted || rep.InFlight != 0 {
				t.Errorf("report: written %d (on disk %d), state %s, in flight %d", rep.Written, len(got), rep.State, rep.InFlight)
			}
			if tc.wantCut && (rep.Canceled < inFlight || len(got) != 0) {
				t.Errorf("canceled %d, written %d: want the %d in flight cut and nothing written", rep.Canceled, len(got), inFlight)
			}
			if !tc.wantCut && len(got) < inFlight-1 {
				t.Errorf("written %d: want the requests in flight at the signal finished", len(got))
			}
			if leftovers, _ := filepath.Glob(filepath.Join(cj.dir, "data", "*.open")); len(leftovers) != 0 {
				t.Errorf("the sink did not close cleanly: %v", leftovers)
			}

			// A resume against a fast server asks what is left, once.
			_, fast := startStatusMock(t, mockserver.Options{MeanTokens: 4000, Seed: 5})
			resume := cliJob{baseURL: fast.URL + "/v1", data: cj.data, dir: cj.dir}
			res := cliRun(t, resume.args("--concurrency", "4", "--generation.max_tokens", "250")...)
			res.ok(t, "resume")
			wantIDs(t, "after resume", cliRecords(t, cj.dir), idRange(0, prompts)...)
			if rep2 := readReport(t, cj.dir); rep2.Written != prompts-len(got) || rep2.Skipped != int64(len(got)) {
				t.Errorf("resume wrote %d and skipped %d; want %d and %d", rep2.Written, rep2.Skipped, prompts-len(got), len(got))
			}
		})
	}
}

// TestRunSignalWhenNothingIsLeft: a Ctrl-C that comes once every prompt was
// taken (the last answers still streaming) cuts nothing: the drain lets them
// finish and the job is complete, so it ends "done" with exit 0, not 130 and
// "rerun to resume" for a rerun that would have nothing to do.
func TestRunSignalWhenNothingIsLeft(t *testing.T) {
	const prompts = 4
	_, srv := startStatusMock(t, mockserver.Options{TokenDelay: 4 * time.Millisecond, MeanTokens: 4000, Seed: 5})
	cj := cliJob{baseURL: srv.URL + "/v1", data: cliDataset(t, prompts, 0), dir: filepath.Join(t.TempDir(), "out")}
	args := cj.args("--concurrency", "4", "--generation.max_tokens", "250", "--shutdown.grace", "1m")
	r := startRunInProcess(args[1:]...)
	status := filepath.Join(cj.dir, statusFile)
	waitInFlight(t, r, status, prompts)
	signalRun(t, r, syscall.SIGINT)
	err := r.wait(t)
	if code := runExitCode(err); code != exitOK {
		t.Fatalf("exit %d (%v), want 0: every key was asked and answered; stderr:\n%s", code, err, r.stderr.String())
	}
	wantIDs(t, "records", cliRecords(t, cj.dir), idRange(0, prompts)...)
	if rep := readReport(t, cj.dir); rep.State != stateDone || rep.Written != prompts {
		t.Errorf("report: state %s written %d, want done and %d", rep.State, rep.Written, prompts)
	}
}

// TestRunSignalWhileServerAway: Ctrl-C while the server is away (every slot
// waits for it on the outage gate, nothing is in flight) stops at once,
// exit 130 and no error record, instead of sitting out shutdown.grace for
// requests that do not exist.
func TestRunSignalWhileServerAway(t *testing.T) {
	var listed atomic.Int64
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") && listed.Add(1) == 1 {
			// Up for the model check, then gone: a proxy whose backend left.
			fmt.Fprint(w, `{"object":"list","data":[{"id":"mock-model","object":"model"}]}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/models") {
			http.Error(w, "backend away", http.StatusBadGateway)
			return
		}
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer away.Close()
	cj := cliJob{baseURL: away.URL + "/v1", data: cliDataset(t, 12, 0), dir: filepath.Join(t.TempDir(), "out")}
	args := cj.args("--concurrency", "4", "--shutdown.grace", "1m")
	r := startRunInProcess(args[1:]...)
	status := filepath.Join(cj.dir, statusFile)
	deadline := time.Now().Add(15 * time.Second)
	for st, _ := readStatusFile(t, status); st.ServerDownSince == nil || st.State != stateRunning; st, _ = readStatusFile(t, status) {
		if time.Now().After(deadline) {
			t.Fatalf("status.json never showed the server down; stderr:\n%s", r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	first := time.Now()
	signalRun(t, r, syscall.SIGINT)
	err := r.wait(t)
	if code := runExitCode(err); code != exitInterrupted {
		t.Fatalf("exit %d (%v), want %d", code, err, exitInterrupted)
	}
	// Not the grace's minute: a bound no loaded machine reaches otherwise.
	if took := time.Since(first); took > 20*time.Second {
		t.Errorf("took %v to stop with nothing in flight", took)
	}
	if n := errorRecords(t, cj.dir); n != 0 {
		t.Errorf("%d error records for keys never answered because the server was away", n)
	}
}

// TestRunRepeatedIDAskedOnce: a dataset whose id column repeats an id runs
// to the end (before, the second answer for the key hit the sink's "written
// once" and stopped the whole run with a write error), writes the key once
// and names each repeat as a bad row, with the line of its first row.
func TestRunRepeatedIDAskedOnce(t *testing.T) {
	_, srv := startStatusMock(t, mockserver.Options{TokenDelay: 2 * time.Millisecond, MeanTokens: 50, Seed: 5})
	var b strings.Builder
	for _, id := range []string{"a", "a", "b", "c", "b"} {
		fmt.Fprintf(&b, `{"id":%q,"messages":[{"role":"user","content":"question %s"}]}`+"\n", id, id)
	}
	data := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cj := cliJob{baseURL: srv.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--dataset.id_field", "id")...)
	r.ok(t, "run with repeated ids")
	wantIDs(t, "records", cliRecords(t, cj.dir), "a", "b", "c")
	if !strings.Contains(r.stderr, "2 dataset rows repeat an earlier row's id") ||
		!strings.Contains(r.stderr, data+`:2: id: repeats the id "a" of `+data+":1") ||
		!strings.Contains(r.stderr, data+`:5: id: repeats the id "b" of `+data+":3") {
		t.Errorf("stderr does not say which rows repeat which ids:\n%s", r.stderr)
	}
}

// TestSecondSignalStartsANewLine: a terminal echoes the second Ctrl-C as
// "^C" where the cursor is, so what the second signal says starts on a line
// of its own instead of after the echo.
func TestSecondSignalStartsANewLine(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &shutdown{ctx: ctx, cancel: cancel, sigs: make(chan os.Signal, 2), got: make(chan struct{})}
	var out bytes.Buffer
	drained := make(chan struct{})
	s.arm(func() { close(drained) })
	go s.watch(time.Hour, &out)
	s.sigs <- os.Interrupt
	<-drained
	s.sigs <- os.Interrupt
	<-ctx.Done() // the message is written before the cancel
	if got := out.String(); !strings.HasPrefix(got, "\nstopping now: ") {
		t.Errorf("the second signal says %q, want it to start on a new line", got)
	}
}
