package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestUnknownCommandIsUsage: a mistyped command is bad usage (exit 2, as
// docs/reference.md's table says), with the nearest command named.
func TestUnknownCommandIsUsage(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"verison", `did you mean "version"?`},
		{"rnu", `did you mean "run"?`},
		{"insepct", `did you mean "inspect"?`},
		{"frobnicate", ""},
	} {
		r := cliRun(t, c.arg)
		if code := exitCode(r.err); r.err == nil || code != exitUsage {
			t.Errorf("synthgen %s: exit %d (%v), want %d", c.arg, code, r.err, exitUsage)
			continue
		}
		msg := r.err.Error()
		if !strings.Contains(msg, `unknown command "`+c.arg+`"`) || (c.want != "" && !strings.Contains(msg, c.want)) {
			t.Errorf("synthgen %s: %q, want it to name the command and say %q", c.arg, msg, c.want)
		}
		if c.want == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("synthgen %s: %q suggests a command nothing like it", c.arg, msg)
		}
		if !strings.Contains(r.hint(), "synthgen --help") {
			t.Errorf("synthgen %s: hint %q", c.arg, r.hint())
		}
	}
}

// TestVersionCommand: `synthgen version` and `synthgen --version` print the
// version the manifest records.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := cliRun(t, args...)
		r.ok(t, strings.Join(args, " "))
		if first, _, _ := strings.Cut(r.stdout, "\n"); first != "synthgen "+version {
			t.Errorf("synthgen %s printed %q, want first line %q", args[0], r.stdout, "synthgen "+version)
		}
	}
}

func TestResolveVersion(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: modified}}
	}
	info := func(mod string, s []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/synthgen/synthgen", Version: mod}, Settings: s}
	}
	for _, c := range []struct {
		what    string
		ldflags string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"ldflags win", "v1.0.0-3-gabc", info("v0.0.0-20250102030405-0123456789ab", vcs("false")), true, "v1.0.0-3-gabc"},
		{"go build in a clean checkout", "", info("v0.0.0-20250102030405-0123456789ab", vcs("false")), true, "0123456789ab"},
		{"go build with uncommitted changes", "", info("v0.0.0-20250102030405-0123456789ab+dirty", vcs("true")), true, "0123456789ab-dirty"},
		{"go build, older go: (devel)", "", info("(devel)", vcs("false")), true, "0123456789ab"},
		{"go install at a release", "", info("v1.2.0", nil), true, "v1.2.0"},
		{"go build at a tagged commit", "", info("v1.2.0", vcs("false")), true, "v1.2.0"},
		{"go install at a commit", "", info("v0.0.0-20250102030405-0123456789ab", nil), true, "v0.0.0-20250102030405-0123456789ab"},
		{"no vcs, no module version", "", info("(devel)", nil), true, "dev"},
		{"no build info", "", nil, false, "dev"},
	} {
		if got := resolveVersion(c.ldflags, c.info, c.ok); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
}

// TestPlainGoBuildNamesItsCommit: a plain `go build -o synthgen
// ./cmd/synthgen` names the commit it was built from, not "dev"; the
// README's own build line does so even on a machine whose GOFLAGS holds
// -buildvcs=false, so that `synthgen version` and every manifest name what
// made them; and the Makefile's -ldflags version still wins. The
// repository's files as they are now are committed into a new repository
// and built there: a git worktree's .git is a file, which the go command
// does not stamp from.
func TestPlainGoBuildNamesItsCommit(t *testing.T) {
	t.Parallel() // its builds share nothing with the tests that need none
	if testing.Short() {
		t.Skip("builds the module in a new repository")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	files, err := exec.Command(git, "-C", "../..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skip("not a git checkout")
	}
	gobin, err := goTool()
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "src")
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join("../..", name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "--quiet")
	gitIn("add", "-A")
	gitIn("commit", "--quiet", "--no-verify", "-m", "build me")
	head := gitIn("rev-parse", "HEAD")

	build := func(goflags string, extra ...string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "synthgen")
		cmd := exec.Command(gobin, append(append(append([]string{"build"}, shareBuildFlags...), extra...), "-o", bin, "./cmd/synthgen")...)
		cmd.Dir = repo
		// GOFLAGS is set: the environment's would be the person's choice,
		// not what the build under test does. The tests' shared
		// configuration (prebuild_test.go) stamps the same version and
		// spares compiling every package of the copy again.
		cmd.Env = append(append(os.Environ(), shareBuildEnv...), "GOFLAGS="+goflags)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", extra, err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("synthgen version: %v", err)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		t.Logf("go build %v: %s", extra, strings.TrimSpace(string(out)))
		return first
	}
	if got, want := build("-buildvcs=auto"), "synthgen "+head[:12]; got != want {
		t.Errorf("plain go build: %q, want %q", got, want)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^go build\b(.*) -o \S+ \./cmd/synthgen$`).FindStringSubmatch(string(readme))
	if line == nil {
		t.Fatal("the README has no line building ./cmd/synthgen: update this test")
	}
	if got, want := build("-buildvcs=false", strings.Fields(line[1])...), "synthgen "+head[:12]; got != want {
		t.Errorf("%q under GOFLAGS=-buildvcs=false: %q, want %q", line[0], got, want)
	}
	if got, want := build("-buildvcs=auto", "-ldflags", "-X main.version=v9.9.9-test"), "synthgen v9.9.9-test"; got != want {
		t.Errorf("go build -ldflags: %q, want %q", got, want)
	}
}

// TestOneCommitForm: a commit is named by the same 12 hex digits wherever
// synthgen shows it: the version a plain go build takes (the header, the
// manifest, report.json), the commit line of `synthgen version`, and the
// Makefile's git describe (-ldflags).
func TestOneCommitForm(t *testing.T) {
	const full = "3318c3a1c849d2f0e6b7a9c5d4e3f2a1b0c9d8e7"
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/synthgen/synthgen", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: full}}}
	v := resolveVersion("", info, true)
	if v != full[:12] {
		t.Errorf("version of a plain go build: %q, want %q", v, full[:12])
	}
	if text := versionTextOf(v, info, true); !strings.Contains(text, "commit   "+full[:12]+"\n") || strings.Contains(text, full) {
		t.Errorf("synthgen version:\n%s\nwant the commit as %s", text, full[:12])
	}

	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	describe := regexp.MustCompile(`(?m)^VERSION\s*\?=\s*\$\(shell git (describe[^)]*?) 2>`).FindSubmatch(makefile)
	if describe == nil {
		t.Fatal("the Makefile's VERSION is no git describe")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	head, err := exec.Command(git, "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout")
	}
	out, err := exec.Command(git, append([]string{"-C", "../.."}, strings.Fields(string(describe[1]))...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", describe[1], err)
	}
	got := strings.TrimSuffix(strings.TrimSpace(string(out)), "-dirty")
	if want := string(head[:12]); !strings.HasSuffix(got, want) || strings.HasSuffix(got, string(head[:13])) {
		t.Errorf("the Makefile's version %q does not end in the commit's 12 digits %s", got, want)
	}
}
