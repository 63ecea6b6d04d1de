package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// These tests are what a new user meets first: the help of a bare run and
// the mistakes one makes typing flags.

// TestBareRunHelpShowsNoDatasetDefault: dataset.path has no default, and
// the help says so: it shows none, and says what a bare run needs. From
// the repository's root, where the bundled sample is, a bare run still
// names no file nobody gave.
func TestBareRunHelpShowsNoDatasetDefault(t *testing.T) {
	r := cliRun(t, "run", "--help")
	r.ok(t, "run --help")
	line := regexp.MustCompile(`(?m)^\s*--dataset\.path .*$`).FindString(r.stdout)
	if line == "" || strings.Contains(line, "(default") || !strings.Contains(line, "no default") {
		t.Errorf("run --help's dataset.path line shows a default, or does not say it has none: %q", line)
	}
	if !strings.Contains(r.stdout, "A bare run needs a dataset") {
		t.Errorf("run --help does not say what a bare run needs:\n%s", r.stdout)
	}

	t.Chdir("../..")
	r = cliRun(t, "run", "--endpoint.base_url", "http://127.0.0.1:1/v1", "--quiet")
	if code := exitCode(r.err); code != exitUsage || !strings.HasPrefix(r.err.Error(), "no dataset given") {
		t.Errorf("a bare run in the repository: exit %d, %v; want %d, no dataset given", code, r.err, exitUsage)
	}
}

// TestBoolFlagValueAfterASpace: --generation.return_token_ids true leaves
// "true" as an argument; the error says how a boolean flag takes a value,
// names the flag, and is a usage error (exit 2).
func TestBoolFlagValueAfterASpace(t *testing.T) {
	t.Parallel()
	r := cliRun(t, "run", "--generation.return_token_ids", "true")
	if code := exitCode(r.err); code != exitUsage {
		t.Fatalf("exit %d (%v), want %d", code, r.err, exitUsage)
	}
	for _, want := range []string{"--flag=true", "did you mean --generation.return_token_ids=true?"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("%q does not say %q", r.err, want)
		}
	}
	r = cliRun(t, "version", "extra")
	if code := exitCode(r.err); code != exitUsage || strings.Contains(r.err.Error(), "--flag") {
		t.Errorf("version extra: exit %d, %v; want %d and no word of boolean flags", code, r.err, exitUsage)
	}
}

// TestQuietPrintsTheSummaryAlone: --quiet prints one summary line on stdout
// and nothing on stderr (no start lines, no "resuming", no "nothing to
// do"), while a warning is still said.
func TestQuietPrintsTheSummaryAlone(t *testing.T) {
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 6, 0), dir: filepath.Join(t.TempDir(), "out")}
	for _, what := range []string{"first run", "rerun with nothing to do"} {
		r := cliRun(t, cj.args("--quiet")...)
		r.ok(t, what)
		if lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "done 6/6 ") {
			t.Errorf("%s: --quiet printed on stdout %q, want one summary line", what, r.stdout)
		}
		if r.stderr != "" {
			t.Errorf("%s: --quiet printed on stderr %q, want nothing", what, r.stderr)
		}
	}
	t.Setenv("SYNTHGEN_CONCURENCY", "5")
	r := cliRun(t, cj.args("--quiet")...)
	r.ok(t, "run with a mistyped variable")
	if !strings.HasPrefix(r.stderr, "warning: environment variable SYNTHGEN_CONCURENCY") {
		t.Errorf("--quiet hid a warning: stderr %q", r.stderr)
	}
}
