package main

import (
	"fmt"
	"os"
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

// writeFiles writes n one-prompt JSONL files into a new directory and
// returns its glob.
func writeFiles(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		row := fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}]}`+"\n", i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%02d.jsonl", i)), []byte(row), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "*.jsonl")
}

// TestRefusalsNameTheirCause: a resume with only the shard count changed
// names the shard, not edited files; 9 shards over 8 files split by file
// says there are more workers than files and what to run; a changed
// setting says whether it came from the file, the environment or a flag.
func TestRefusalsNameTheirCause(t *testing.T) {
	m, url := cliMock(t, nil)
	data := writeFiles(t, 8)
	dir := filepath.Join(t.TempDir(), "out")
	run := func(extra ...string) cliResult {
		return cliRun(t, append([]string{"run", "--endpoint.base_url", url, "--dataset.path", data,
			"--dataset.shard_by", "files", "--output.dir", dir, "--output.format", "jsonl", "--quiet"}, extra...)...)
	}
	run("--shard", "1/4").ok(t, "shard 1/4")

	r := run("--shard", "1/5")
	if code := exitCode(r.err); code != exitUsage || !strings.Contains(r.err.Error(), "this directory holds shard 1/4 and this run asks for shard 1/5") ||
		strings.Contains(r.err.Error(), "edited, reordered") || !strings.Contains(r.err.Error(), "(now) from flag --shard") {
		t.Errorf("resume of 1/4 as 1/5: exit %d, %v; want %d and the shard named as the change", code, r.err, exitUsage)
	}

	t.Setenv("SYNTHGEN_GENERATION_TEMPERATURE", "0.9")
	r = run("--shard", "1/4")
	if code := exitCode(r.err); code != exitUsage || !strings.Contains(r.err.Error(), "generation.temperature: 0.6 (on disk) -> 0.9 (now) from env SYNTHGEN_GENERATION_TEMPERATURE") {
		t.Errorf("resume with another temperature from the environment: exit %d, %v; want the variable named", code, r.err)
	}

	before := m.Stats().Requests
	r = run("--shard", "8/9", "--output.dir", filepath.Join(t.TempDir(), "nine"))
	if code := exitCode(r.err); code != exitUsage || !strings.Contains(r.hint(), "more workers than files") || !strings.Contains(r.hint(), "--array=0-7") {
		t.Errorf("shard 8/9 over 8 files: exit %d, %v, hint %q; want %d and a hint about more workers than files", code, r.err, r.hint(), exitUsage)
	}
	if n := m.Stats().Requests - before; n != 0 {
		t.Errorf("shard 8/9 over 8 files sent %d requests", n)
	}
}
