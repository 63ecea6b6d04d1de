//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/sink"
)

// waitFlockWaiter polls /proc/locks until pid waits for a flock, and fails
// when the process ends or the deadline (a failure bound) passes first.
func waitFlockWaiter(t *testing.T, p *proc, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Skipf("no /proc/locks: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && f[1] == "->" && f[2] == "FLOCK" && f[5] == strconv.Itoa(pid) {
				return
			}
		}
		if p.exited() {
			t.Fatalf("the export ended before it waited for the lock; stderr:\n%s", p.stderr(t))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the export never waited for the lock on its directory; stderr:\n%s", p.stderr(t))
		}
	}
}

// TestExportStopsOnSIGTERM: SIGTERM stops the synthgen binary's export
// with exit 130, saying nothing was written, and leaves nothing beside
// --out. The signal is sent at a point the test controls: the test holds
// the exclusive lock of --out's directory (as an export removing a killed
// one's leftovers does), so the export waits for it, its signals already
// taken over, before it builds anything; the lock is let go once the
// export said it took the signal.
func TestExportStopsOnSIGTERM(t *testing.T) {
	ds := inspectDataset(t, 40)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 40, 1), nil, "")
	parent := t.TempDir()
	out := filepath.Join(parent, "train.jsonl")
	d, err := os.Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	p := startSynthgen(t, "export", "export", dir, "--format", "messages", "--out", out)
	waitFlockWaiter(t, p, p.cmd.Process.Pid)
	p.signal(t, syscall.SIGTERM)
	// The lock goes once the export has taken the signal (it says so).
	p.waitForOutput(t, true, regexp.MustCompile(`export: terminated: stopping`), 30*time.Second)
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitInterrupted {
		t.Fatalf("exit %d after SIGTERM, want %d; stderr:\n%s", code, exitInterrupted, p.stderr(t))
	}
	if s := p.stderr(t); !strings.Contains(s, "export: interrupted (terminated): nothing was written under "+out+", and no temporary is left") {
		t.Errorf("stderr does not say the export was interrupted and left nothing:\n%s", s)
	}
	if got := names(t, parent); len(got) != 0 {
		t.Errorf("beside --out after SIGTERM: %v", got)
	}
}
