package main

// The binaries the tests build with the go command: each is built once per
// test process, and, when the whole package runs (make test), started by
// TestMain before the first test so that its build overlaps the tests that
// need none instead of waiting for its turn (the Dockerfile's build shares
// no cache with the race-instrumented test binary and took minutes of the
// package's run on a loaded 2-core machine).

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// prebuilt is one binary built once, in the background.
type prebuilt struct {
	build func(dir string) (string, error) // builds into dir, returns the binary's path

	once sync.Once
	done chan struct{}
	path string
	err  error
}

var (
	tmpRoot     string // the builds' directory, removed by TestMain
	tmpRootOnce sync.Once
	tmpRootErr  error

	started []*prebuilt // guarded by startedMu; TestMain waits for them
	startMu sync.Mutex
)

// start begins p's build unless it has begun.
func (p *prebuilt) start() {
	p.once.Do(func() {
		p.done = make(chan struct{})
		startMu.Lock()
		started = append(started, p)
		startMu.Unlock()
		go func() {
			defer close(p.done)
			tmpRootOnce.Do(func() { tmpRoot, tmpRootErr = os.MkdirTemp("", "synthgen-test-bin-") })
			if tmpRootErr != nil {
				p.err = tmpRootErr
				return
			}
			dir, err := os.MkdirTemp(tmpRoot, "")
			if err != nil {
				p.err = err
				return
			}
			p.path, p.err = p.build(dir)
		}()
	})
}

// wait starts p's build if need be and returns the binary's path; a
// failed build fails t.
func (p *prebuilt) wait(t testing.TB) string {
	t.Helper()
	p.start()
	<-p.done
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

// goBuild runs the go command's build of this package (the test's working
// directory) into dir/synthgen with args and extra environment.
func goBuild(dir string, env []string, args ...string) (string, error) {
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "synthgen")
	cmd := exec.Command(gobin, append(append([]string{"build"}, args...), "-o", out, ".")...)
	cmd.Env = append(os.Environ(), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// e2eBinary is the binary the end-to-end tests run, built without -race
// (the race detector instruments this test process, which hosts the mock,
// not the program under test), in the Dockerfile's configuration
// (shareBuildConfig): what the image ships is what the tests run.
var e2eBinary = &prebuilt{build: func(dir string) (string, error) {
	return goBuild(dir, shareBuildEnv, shareBuildFlags...)
}}

// shareBuildEnv and shareBuildFlags are the Dockerfile's build
// configuration without its -ldflags (TestDockerfileBuildsStatic holds
// the Dockerfile to both). Every go build of the tests
// uses it (the README's and a plain build's add it to theirs) so that the
// packages are compiled once without -race and every other build only
// links: a build with cgo or without -trimpath compiles every package
// again, and a build in another directory (TestPlainGoBuildNamesItsCommit)
// did so on every run, warm cache or not, because without -trimpath the
// directory is part of each package's cache key. Neither setting bears on
// what those tests check (the version stamped into the binary).
var (
	shareBuildEnv   = []string{"CGO_ENABLED=0"}
	shareBuildFlags = []string{"-trimpath"}
)

// dockerVersion is the VERSION the Dockerfile's build is given.
const dockerVersion = "v9.9.9-dockerfile"

// dockerBinary is the package built with the Dockerfile's own go build
// line: its environment and flags, ${VERSION} as dockerVersion.
var dockerBinary = &prebuilt{build: func(dir string) (string, error) {
	d, err := parseDockerfile()
	if err != nil {
		return "", err
	}
	if len(d.buildArgs) == 0 || d.buildArgs[len(d.buildArgs)-1] != "./cmd/synthgen" {
		return "", fmt.Errorf("go build %q: want the package ./cmd/synthgen last", d.buildArgs)
	}
	var args []string
	for _, a := range d.buildArgs[:len(d.buildArgs)-1] {
		args = append(args, strings.ReplaceAll(a, "${VERSION}", dockerVersion))
	}
	return goBuild(dir, d.buildEnv, args...)
}}

// TestMain starts the builds the selected tests need, fails the run when a
// goroutine outlives the tests (the in-process runs must stop everything
// they start), and removes the built binaries.
func TestMain(m *testing.M) {
	flag.Parse()
	widenParallel()
	// This process hosts the mocks and reads every record back under
	// -race; at the default GOGC its collector took 13% of its CPU. No
	// test here measures this process's memory (the binaries it runs keep
	// their own GOGC).
	debug.SetGCPercent(400)
	if !listing() {
		if selected("") { // the whole package; a -run builds it at the first test that needs it
			e2eBinary.start()
		}
		if selected("TestDockerfileBuildsStatic") && runtime.GOOS == "linux" && !testing.Short() {
			dockerBinary.start()
		}
	}
	code := m.Run()
	startMu.Lock()
	for _, p := range started {
		<-p.done // no build outlives the tests
	}
	startMu.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	if tmpRoot != "" {
		_ = os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

// testParallel is how many of this package's parallel tests run at once
// unless -parallel says otherwise. Its tests mostly wait (on a mock's
// token delays, a child process, a signal's drain): on the 2-core machine
// the package kept 1.06 cores busy at go test's default of GOMAXPROCS and
// took 155 s; at 6 it took 105 s with the same CPU. Every test here is
// judged on the mock's counts and its own clock, not on the CPU it gets.
const testParallel = 6

// widenParallel raises -test.parallel to testParallel when it was not set.
func widenParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < testParallel {
		_ = flag.Set("test.parallel", strconv.Itoa(testParallel))
	}
}

// listing: go test -list runs no test.
func listing() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

// selected says whether -run selects the top-level test name (no -run:
// every test; the name "": whether there is no -run). A pattern that does
// not compile selects nothing here; go test reports it.
func selected(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	if name == "" {
		return false
	}
	first, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(first)
	return err == nil && re.MatchString(name)
}
