package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/config"
)

// TestExampleConfigsLoad: the configs in examples/ are what people copy; a
// key renamed in config/ must not leave them behind with an error only a
// user would see.
func TestExampleConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v, %d configs", err, len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := config.Load(nil, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestREADMEBuildOutputIgnored: the README's `go build -o NAME` leaves NAME
// in the repository root; git must not offer it for a commit.
func TestREADMEBuildOutputIgnored(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	if err := exec.Command(git, "-C", "../..", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	outs := regexp.MustCompile(`go build\b[^\n]*?-o (\S+)`).FindAllStringSubmatch(string(readme), -1)
	if len(outs) == 0 {
		t.Fatal("the README builds nothing with go build -o: update this test")
	}
	for _, m := range outs {
		name := strings.TrimPrefix(m[1], "./")
		// check-ignore exits 0 when ignored, 1 when not.
		if err := exec.Command(git, "-C", "../..", "check-ignore", "-q", "--no-index", name).Run(); err != nil {
			t.Errorf("%s, built by the README's %q, is not ignored by .gitignore (%v)", name, m[0], err)
		}
	}
}
