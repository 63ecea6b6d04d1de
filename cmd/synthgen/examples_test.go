package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
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

// TestMessagesRerunSaysWhatDiffers: examples/messages-rerun.yaml presents
// itself as the 25K job with another dataset; whoever copies it must learn
// from its header every other key it changes, since each one changes the
// answers (a system prompt, thinking switched on).
func TestMessagesRerunSaysWhatDiffers(t *testing.T) {
	base, err := config.Load(nil, "../../examples/perfectblend-25k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rerun, err := config.Load(nil, "../../examples/messages-rerun.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("../../examples/messages-rerun.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var header strings.Builder
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		header.WriteString(line + "\n")
	}
	a, b := map[string]any{}, map[string]any{}
	flatten("", base.Redacted(), a)
	flatten("", rerun.Redacted(), b)
	var differ []string
	for k := range a {
		if _, ok := b[k]; !ok {
			differ = append(differ, k)
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || fmt.Sprint(v) != fmt.Sprint(w) {
			differ = append(differ, k)
		}
	}
	sort.Strings(differ)
	t.Logf("keys that differ: %v", differ)
	for _, k := range differ {
		if strings.HasPrefix(k, "dataset.") || strings.HasPrefix(k, "output.") {
			continue // the header says these differ
		}
		if last := k[strings.LastIndexByte(k, '.')+1:]; !strings.Contains(header.String(), last) {
			t.Errorf("%s differs from perfectblend-25k.yaml (%v, not %v) but the header does not say so:\n%s",
				k, b[k], a[k], header.String())
		}
	}
}

// flatten puts a nested config map's leaves into out by dotted name.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flatten(name, sub, out)
			continue
		}
		out[name] = v
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

// TestNohupLinesAppend: a job is resumed by running the same line again, so
// every nohup line we show (the README, docs/getting-started.md, run --help,
// examples/nohup-run.sh, the job files' comments) appends to its log: '> gen.log' would wipe the first run's lines, and
// with them the record of what happened overnight, on every resume.
func TestNohupLinesAppend(t *testing.T) {
	texts := map[string]string{"run --help": newRunCmd().Example}
	for _, f := range []string{"../../README.md", "../../docs/getting-started.md", "../../examples/nohup-run.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Base(f)] = string(b)
	}
	// A job file's comment need not show one; where it does, it appends.
	jobs, _ := filepath.Glob("../../examples/*.yaml")
	optional := map[string]bool{}
	for _, f := range jobs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Base(f)] = string(b)
		optional[filepath.Base(f)] = true
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
		if n == 0 && !optional[name] {
			t.Errorf("%s shows no nohup line", name)
		}
	}
}

// TestDrafterExampleNamesItsTurns: the README sells generation.turns: all
// for draft-model training, so the drafter example states its choice,
// not the default by silence, with the comment that says why.
func TestDrafterExampleNamesItsTurns(t *testing.T) {
	text, err := os.ReadFile("../../examples/perfectblend-25k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	for i, line := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "turns:"); ok {
			if v = strings.TrimSpace(v); v != "first" && v != "all" {
				t.Errorf("line %d: turns: %q, want first or all", i+1, v)
			}
			if above := strings.Join(lines[max(i-10, 0):i], "\n"); !strings.Contains(above, "`first`") || !strings.Contains(above, "`all`") {
				t.Errorf("line %d: turns: %s without the comment above it that weighs first against all", i+1, v)
			}
			return
		}
	}
	t.Error("examples/perfectblend-25k.yaml does not name generation.turns")
}
