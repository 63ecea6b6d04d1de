package main

import (
	"os"
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

// TestNohupLinesAppend: a job is resumed by running the same line again, so
// every nohup line we show (the README, run --help, examples/nohup-run.sh)
// appends to its log: '> gen.log' would wipe the first run's lines, and
// with them the record of what happened overnight, on every resume.
func TestNohupLinesAppend(t *testing.T) {
	texts := map[string]string{"run --help": newRunCmd().Example}
	for _, f := range []string{"../../README.md", "../../examples/nohup-run.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Base(f)] = string(b)
	}
	truncating := regexp.MustCompile(`nohup .*[^>]>\s*"?\$?[\w{}./-]*log\b`)
	for name, text := range texts {
		n := 0
		for _, line := range strings.Split(text, "\n") {
			if !strings.Contains(line, "nohup ") || !strings.Contains(line, "run ") {
				continue
			}
			n++
			if truncating.MatchString(line) || !strings.Contains(line, ">>") {
				t.Errorf("%s: %q truncates its log on every resume: append with >>", name, strings.TrimSpace(line))
			}
		}
		if n == 0 {
			t.Errorf("%s shows no nohup line", name)
		}
	}
}
