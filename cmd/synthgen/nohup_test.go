package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNohupScriptBuildsEveryTime: examples/nohup-run.sh builds bin/synthgen
// before it starts it, even when one is there, so that an old binary never
// runs silently. The script runs in a copy of the repository's layout, with
// a make on PATH that records its call and writes a new bin/synthgen.
func TestNohupScriptBuildsEveryTime(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	repo := t.TempDir()
	script, err := os.ReadFile("../../examples/nohup-run.sh")
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, text string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(repo, "examples", "nohup-run.sh"), string(script), 0o755)
	write(filepath.Join(repo, "bin", "synthgen"), "#!/bin/sh\necho old binary\n", 0o755)
	tools := t.TempDir()
	write(filepath.Join(tools, "make"), "#!/bin/sh\necho \"$@\" > \"$MAKE_CALLED\"\nprintf '#!/bin/sh\\necho new binary \"$@\"\\n' > bin/synthgen\n", 0o755)
	called := filepath.Join(t.TempDir(), "make-called")
	job := filepath.Join(repo, "job.yaml")
	write(job, "concurrency: 1\n", 0o644)

	cmd := exec.Command(bash, filepath.Join(repo, "examples", "nohup-run.sh"), job)
	cmd.Env = append(childEnv(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"), "MAKE_CALLED="+called)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nohup-run.sh: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(called); err != nil || !strings.Contains(string(b), "build") {
		t.Errorf("nohup-run.sh did not run make build with a bin/synthgen there (%v, %q)", err, b)
	}
	// The job runs detached: wait for its line in the log.
	log := filepath.Join(repo, "job.log")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "new binary run --config "+job) {
			break
		}
		if strings.Contains(string(b), "old binary") || time.Now().After(deadline) {
			t.Fatalf("job.log %q: want the new binary's run", b)
		}
	}
}
