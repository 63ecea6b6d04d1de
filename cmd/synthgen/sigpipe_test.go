//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/synthgen/synthgen/mockserver"
)

// TestClosedStdoutDoesNotStopTheRun: `synthgen run ... | head -1` closes
// the run's stdout after one line; the run must go on to its end (exit 0,
// every record written, report.json done), not die of SIGPIPE.
func TestClosedStdoutDoesNotStopTheRun(t *testing.T) {
	t.Parallel()
	const prompts = 40
	m := startMock(t, mockserver.Options{TokenDelay: 2 * time.Millisecond, MeanTokens: 40, Seed: 5})
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cmd := exec.Command(synthgenBinary(t), "run",
		"--dataset.path", writeShareGPT(t, dir, prompts),
		"--endpoint.base_url", m.BaseURL,
		"--output.dir", out,
		"--output.format", "jsonl",
		"--concurrency", "4",
		"--progress.interval", "50ms",
	)
	cmd.Env = childEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// head -1: one line, then the pipe's reading end is gone.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("no first line: %v", err)
	}
	_ = stdout.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute): // generous: the job takes about a second
		_ = cmd.Process.Kill()
		t.Fatal("the run did not end")
	}
	if err != nil {
		t.Fatalf("the run ended with %v after its stdout closed, want exit 0 (%s)", err, cmd.ProcessState)
	}
	wantIDs(t, "records", cliRecords(t, out), idRange(0, prompts)...)
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		State    string `json:"state"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.State != "done" || rep.ExitCode != 0 {
		t.Errorf("report.json: %+v (%v), want done, exit 0", rep, err)
	}
}
