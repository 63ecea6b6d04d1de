package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The deployment files (the Dockerfile, examples/kubernetes, examples/slurm)
// are run where no test can follow them: on a cluster, by a container
// engine. These tests hold them to what synthgen needs from them.

// dockerfile is what the tests rely on in the Dockerfile.
type dockerfile struct {
	froms      []string // each stage's base image, in order
	buildEnv   []string // NAME=value before `go build` in the RUN line
	buildArgs  []string // the words after `go build`, -o and its value left out
	out        string   // go build's -o
	copies     []string // the last stage's COPY lines, as written
	user       string   // the last USER
	entrypoint string   // ENTRYPOINT, as written
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	builds := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.froms = append(d.froms, strings.Fields(rest)[0])
			d.copies = nil
		case "COPY":
			d.copies = append(d.copies, rest)
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = rest
		case "RUN":
			words := shellWords(t, rest)
			for i := 0; i+1 < len(words); i++ {
				if words[i] != "go" || words[i+1] != "build" {
					continue
				}
				builds++
				d.buildEnv = words[:i]
				for j := i + 2; j < len(words); j++ {
					if words[j] == "-o" && j+1 < len(words) {
						d.out = words[j+1]
						j++
						continue
					}
					d.buildArgs = append(d.buildArgs, words[j])
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if builds != 1 {
		t.Fatalf("the Dockerfile has %d RUN lines with go build, want 1 (continued lines are not read here)", builds)
	}
	return d
}

// shellWords splits a RUN line as sh would for the plain words and double
// quotes the Dockerfile uses; anything fancier fails the test.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	if strings.ContainsAny(s, "'\\`;&|") {
		t.Fatalf("RUN %s: quoting this test does not read", s)
	}
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			in = !in
			quoted = true
		case (r == ' ' || r == '\t') && !in:
			if cur.Len() > 0 || quoted {
				words = append(words, cur.String())
			}
			cur.Reset()
			quoted = false
		default:
			cur.WriteRune(r)
		}
	}
	if in {
		t.Fatalf("RUN %s: unbalanced quote", s)
	}
	if cur.Len() > 0 || quoted {
		words = append(words, cur.String())
	}
	return words
}

// TestDockerfileBuildsStatic: the Dockerfile's final stage has no libc, so
// the binary must be static, and it has no shell, so the ENTRYPOINT is the
// binary on the PATH. The test builds the binary with the Dockerfile's own go
// build line (environment, flags, package) and checks what the image needs:
// an ELF with no interpreter and no shared library, that runs and names the
// version it was given.
func TestDockerfileBuildsStatic(t *testing.T) {
	d := readDockerfile(t)

	if len(d.froms) < 2 {
		t.Fatalf("FROM %v: want a builder stage and a final stage", d.froms)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	if want := "golang:" + string(m[1]); !strings.HasPrefix(d.froms[0], want) {
		t.Errorf("builder FROM %s, want %s (go.mod's go %s)", d.froms[0], want, m[1])
	}
	final := d.froms[len(d.froms)-1]
	if final != "scratch" && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final FROM %s: want distroless/static (CA certificates, a non-root user) or scratch", final)
	}
	if d.user == "" || d.user == "root" || strings.HasPrefix(d.user, "0") {
		t.Errorf("USER %q: the image must not run as root", d.user)
	}
	if d.entrypoint != `["synthgen"]` {
		t.Errorf(`ENTRYPOINT %s, want ["synthgen"] (exec form: the image has no shell)`, d.entrypoint)
	}
	copied := false
	for _, c := range d.copies {
		f := strings.Fields(c)
		if len(f) == 3 && f[0] == "--from=build" && f[1] == d.out && f[2] == "/usr/local/bin/synthgen" {
			copied = true
		}
	}
	if !copied {
		t.Errorf("the final stage does not COPY --from=build %s /usr/local/bin/synthgen (on distroless' PATH): %q", d.out, d.copies)
	}
	if !slices.Contains(d.buildEnv, "CGO_ENABLED=0") {
		t.Errorf("go build runs with %q: want CGO_ENABLED=0, the image has no libc", d.buildEnv)
	}
	if !slices.Contains(d.buildArgs, "-trimpath") {
		t.Errorf("go build %q: want -trimpath (no build machine paths in the binary)", d.buildArgs)
	}
	if n := len(d.buildArgs); n == 0 || d.buildArgs[n-1] != "./cmd/synthgen" {
		t.Fatalf("go build %q: want the package ./cmd/synthgen last", d.buildArgs)
	}
	ldflags := ""
	for i, a := range d.buildArgs {
		if a == "-ldflags" && i+1 < len(d.buildArgs) {
			ldflags = d.buildArgs[i+1]
		}
	}
	if !strings.Contains(ldflags, "-X main.version=${VERSION}") {
		t.Errorf("-ldflags %q: want -X main.version=${VERSION} (the build argument)", ldflags)
	}

	if runtime.GOOS != "linux" {
		t.Skip("the image is Linux; the binary check reads ELF")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	gobin, err := goTool()
	if err != nil {
		t.Fatal(err)
	}
	const ver = "v9.9.9-dockerfile"
	bin := filepath.Join(t.TempDir(), "synthgen")
	args := []string{"build"}
	for _, a := range d.buildArgs[:len(d.buildArgs)-1] {
		args = append(args, strings.ReplaceAll(a, "${VERSION}", ver))
	}
	args = append(args, "-o", bin, ".") // ./cmd/synthgen, from here
	cmd := exec.Command(gobin, args...)
	cmd.Env = append(os.Environ(), d.buildEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter (PT_INTERP): it is dynamically linked and will not start on distroless/static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Fatal(err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (DT_NEEDED)", libs)
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("synthgen version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), ver) {
		t.Errorf("synthgen version says %q, want %s from -ldflags", out, ver)
	}
}
