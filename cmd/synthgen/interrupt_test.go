package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCtrlCIsNoError: a Ctrl-C the person gave ends with what happened and
// what to do, said as an interruption, not as an "Error:", and exit 130.
func TestCtrlCIsNoError(t *testing.T) {
	t.Parallel()
	m := startMockProcess(t, "--token-delay", "5ms", "--mean-tokens", "40", "--seed", "2")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	p := startSynthgen(t, "run", "run", "--dataset.path", writeShareGPT(t, dir, 400),
		"--endpoint.base_url", m.BaseURL, "--output.dir", out, "--concurrency", "2",
		"--progress.interval", "100ms", "--log-format", "json")
	waitProgress(t, p, 30*time.Second, func(l progressLine) bool { return l.Done >= 2 })
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT, want %d; stderr:\n%s", code, exitInterrupted, p.stderr(t))
	}
	inv, err := readInventory(out)
	if err != nil {
		t.Fatal(err)
	}
	stderr := p.stderr(t)
	want := fmt.Sprintf("interrupted: %d new records written; run the same command to resume\n", len(inv.Records))
	if !strings.HasSuffix(stderr, want) || strings.Contains(stderr, "Error:") {
		t.Errorf("stderr after a Ctrl-C does not end with %q, or says Error:\n%s", want, stderr)
	}
}
