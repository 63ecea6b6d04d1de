//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRunFullTmpfs runs a job whose output does not fit on a real small
// filesystem: a 256 KiB tmpfs (it needs root, or the right to mount; the
// test skips saying so otherwise). The run stops with exit 1 and a message
// that names the directory and the space left on it; once the tmpfs is
// grown to 64 MiB (mount -o remount: the space freed), the same command
// completes the job with every key on disk once.
func TestRunFullTmpfs(t *testing.T) {
	t.Parallel() // its own mocks, directories and processes
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root or CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})

	// Prompts of about 1 KiB: 600 records are some 800 KiB, three times
	// the filesystem.
	const prompts = 600
	pad := strings.Repeat("x", 1000)
	var b strings.Builder
	for i := range prompts {
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"question %d %s"}]}`+"\n", i, pad)
	}
	data := filepath.Join(t.TempDir(), "prompts.jsonl") // off the tmpfs
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: data, dir: filepath.Join(mnt, "out")}

	r := cliRun(t, cj.args()...)
	if r.err == nil {
		t.Fatalf("a job three times the filesystem succeeded:\n%s", r.stdout)
	}
	if code := exitCode(r.err); code != exitFailure {
		t.Errorf("exit %d, want %d (the run could not go on)", code, exitFailure)
	}
	msg := r.err.Error()
	re := regexp.MustCompile(`^no space left on device writing ` + regexp.QuoteMeta(cj.dir) + `/\S+: \d+(\.\d)? (B|KiB|MiB) free on the filesystem of ` +
		regexp.QuoteMeta(cj.dir) + `; free space, then run the same command to resume$`)
	if !re.MatchString(msg) {
		t.Errorf("the message does not name the file, the free space and the directory:\n  %s", msg)
	}
	t.Logf("stderr of the full run:\n%s", r.stderr)
	t.Logf("Error: %s", msg)
	t.Logf("summary: %s", strings.SplitN(r.stdout, "\n", 2)[0])
	inv, err := readInventory(cj.dir) // whole records, each key once
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Records) == 0 || len(inv.Records) >= prompts {
		t.Fatalf("%d records on the full filesystem, want some but not all %d", len(inv.Records), prompts)
	}
	t.Logf("on the full tmpfs: %d records, %d torn files, temporaries %v", len(inv.Records), inv.Torn, inv.Temps)

	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	resumeAfterDiskFull(t, cj, cj.args(), prompts, len(inv.Records))
}
