package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/hidden"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// hsGate holds the mock's hidden-state files from the from-th on (the
// server's file numbers: generation requests' files count) until release,
// and closes held once n of them are held: with the pass's n workers each
// waiting on one file's lock, the pass can start nothing else, and every
// unit before them is kept or given up on.
type hsGate struct {
	mu       sync.Mutex
	from, n  int64
	count    int64
	held     chan struct{}
	released chan struct{}
}

func (g *hsGate) arm(from, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.from, g.n, g.count = from, n, 0
	g.held, g.released = make(chan struct{}), make(chan struct{})
}

func (g *hsGate) fn(n int64) {
	g.mu.Lock()
	if g.held == nil || n < g.from {
		g.mu.Unlock()
		return
	}
	g.count++
	if g.count == g.n {
		close(g.held)
	}
	released := g.released
	g.mu.Unlock()
	<-released
}

func (g *hsGate) wait(t *testing.T, p *proc) {
	t.Helper()
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	select {
	case <-held:
	case <-p.done:
		t.Fatalf("synthgen ended (exit %d) before its pass was held; stderr:\n%s", p.cmd.ProcessState.ExitCode(), p.stderr(t))
	}
}

// release lets the held files be written, and disarms the gate.
func (g *hsGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.released)
		g.held = nil
	}
}

// readRunFile decodes DIR/status.json or DIR/report.json.
func readRunFile[T any](t *testing.T, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return v
}

// waitStatus polls status.json, rewritten every progress.interval, until
// ok holds of it; it fails when the process ends first.
func waitStatus(t *testing.T, p *proc, out string, what string, ok func(runfiles.StatusRecord) bool) runfiles.StatusRecord {
	t.Helper()
	path := filepath.Join(out, runfiles.StatusFile)
	deadline := time.Now().Add(2 * time.Minute)
	var last runfiles.StatusRecord
	for {
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &last) == nil && ok(last) {
			return last
		}
		if p.exited() || time.Now().After(deadline) {
			h, _ := json.Marshal(last.HiddenStates)
			t.Fatalf("status.json never said %s (last: state %s, hidden_states %s); stderr:\n%s", what, last.State, h, p.stderr(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkHiddenDir holds out's hidden folder to its kept log: every line's
// file whole with its unit's ids, nothing else there but the log and the
// failures (no temporary, no file without its line). It returns the kept
// file names.
func checkHiddenDir(t *testing.T, out string, units []hidden.Unit) map[string]int64 {
	t.Helper()
	kept := readKept(t, out)
	for _, u := range units {
		if _, ok := kept[u.FileName()]; ok {
			checkHiddenFile(t, filepath.Join(out, hidden.DirName, u.FileName()), u.IDs, 2, 4)
		}
	}
	ents, err := os.ReadDir(filepath.Join(out, hidden.DirName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, ok := kept[e.Name()]; !ok && e.Name() != hidden.LogName && e.Name() != hidden.FailedName {
			t.Errorf("%s in %s is no kept file", e.Name(), hidden.DirName)
		}
	}
	return kept
}

// checkEnded holds status.json and report.json to a pass that ended in
// state with the exit code, kept files kept by it and before, of 40.
func checkEnded(t *testing.T, out string, state runfiles.State, code, kept, before int) {
	t.Helper()
	st := readRunFile[runfiles.StatusRecord](t, filepath.Join(out, runfiles.StatusFile))
	rep := readRunFile[runfiles.ReportRecord](t, filepath.Join(out, runfiles.ReportFile))
	want := runfiles.HiddenStatesRecord{State: state, Units: 40, Kept: kept, KeptBefore: before, ToExtract: 40 - kept - before}
	for name, h := range map[string]*runfiles.HiddenStatesRecord{runfiles.StatusFile: st.HiddenStates, runfiles.ReportFile: rep.HiddenStates} {
		if h == nil {
			t.Errorf("%s: no hidden_states", name)
			continue
		}
		got := *h
		if got.BytesKept <= 0 || got.ProjectedBytes <= 0 || got.Failed != 0 || got.Errors != 0 {
			t.Errorf("%s: hidden_states %+v: bytes, projection or errors wrong", name, got)
		}
		got.BytesKept, got.ProjectedBytes = 0, 0
		if got != want {
			t.Errorf("%s: hidden_states %+v, want %+v", name, got, want)
		}
	}
	// The run itself was done: the state at the top is the pass's end.
	if st.State != state || rep.State != state || rep.ExitCode != code || rep.Written+int(rep.Skipped) != 40 {
		t.Errorf("status.json state %s, report.json state %s exit %d, %d written %d skipped; want %s, exit %d, 40 records",
			st.State, rep.State, rep.ExitCode, rep.Written, rep.Skipped, state, code)
	}
}

// TestHiddenStatesSignals: the hidden-state pass of a 40-record run
// (concurrency 4) is seen in status.json while it runs; a SIGINT while
// its 4 workers each wait on a file drains it (the 4 finish and are kept,
// nothing else is asked, exit 130); a resume stopped the same way by two
// SIGINTs stops at once, the 4 in flight abandoned with nothing half
// kept; a last resume extracts only what is not kept, never a kept unit
// again. Judged on the files, the kept log and the mock's counts.
func TestHiddenStatesSignals(t *testing.T) {
	t.Parallel()
	synthgenBinary(t)
	work := t.TempDir()
	ds := writeShareGPT(t, work, 40)
	out, hsDir := filepath.Join(work, "out"), filepath.Join(work, "hs")
	if err := os.Mkdir(hsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	g := &hsGate{}
	t.Cleanup(g.release)
	m := startMock(t, mockserver.Options{MeanTokens: 20, Seed: 11, HiddenStates: hiddenstates.Options{Dir: hsDir, Layers: 2, Hidden: 4, Gate: g.fn}})
	hs := m.HiddenStates()
	args := []string{"run", "--dataset.path", ds, "--endpoint.base_url", m.BaseURL, "--output.dir", out,
		"--output.format", "jsonl", "--generation.return_token_ids", "--concurrency", "4",
		"--progress.interval", "50ms", "--shutdown.grace", "10m",
		"--hidden_states.enabled", "--hidden_states.dir", hsDir, "--hidden_states.layers", "2", "--hidden_states.hidden_size", "4"}
	draining := regexp.MustCompile("stopping the hidden-state pass")

	// 1. The 40 generation requests write files 1-40; the pass's 11th
	// file on are held: 10 kept, 4 in flight.
	g.arm(40+11, 4)
	p := startSynthgen(t, "drained", args...)
	g.wait(t, p)
	units, err := hidden.Units(out)
	if err != nil || len(units) != 40 {
		t.Fatalf("%d units (%v), want 40", len(units), err)
	}
	st := waitStatus(t, p, out, "the pass running with 10 kept", func(s runfiles.StatusRecord) bool {
		return s.HiddenStates != nil && s.HiddenStates.Kept == 10
	})
	if h := st.HiddenStates; st.State != runfiles.StateRunning || h.State != runfiles.StateRunning || h.Units != 40 || h.ToExtract != 30 ||
		h.KeptBefore != 0 || h.BytesKept <= 0 || h.ProjectedBytes <= h.BytesKept || st.Done != 40 {
		t.Errorf("status.json while the pass runs: state %s, done %d, hidden_states %+v", st.State, st.Done, *h)
	}
	if kept := readKept(t, out); int64(len(kept)) != 10 || sumBytes(kept) != st.HiddenStates.BytesKept {
		t.Errorf("%d kept, %d bytes; status.json says 10, %d", len(kept), sumBytes(kept), st.HiddenStates.BytesKept)
	}
	cliRun(t, "inspect", out).ok(t, "inspect while the pass runs")
	viewURL, _ := startView(t, out)
	if _, page := httpGet(t, viewURL); !strings.Contains(page, `class="live"`) {
		t.Errorf("the view does not say the run is live while its pass runs")
	}
	p.signal(t, syscall.SIGINT)
	p.waitForOutput(t, true, draining, 2*time.Minute)
	waitStatus(t, p, out, "the pass draining", func(s runfiles.StatusRecord) bool {
		return s.HiddenStates != nil && s.HiddenStates.State == runfiles.StateDraining && s.State == runfiles.StateDraining
	})
	g.release()
	if code := p.wait(t, 2*time.Minute); code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT in the pass, want %d; stderr:\n%s", code, exitInterrupted, p.stderr(t))
	}
	hs.Wait()
	if kept := checkHiddenDir(t, out, units); len(kept) != 14 {
		t.Errorf("%d kept after the drain, want the 10 before it and the 4 in flight", len(kept))
	}
	if c := hs.Counts(); c.Requests != 14 {
		t.Errorf("%d extraction requests, want 14: a drain starts none", c.Requests)
	}
	checkEnded(t, out, runfiles.StateInterrupted, exitInterrupted, 14, 0)
	cliRun(t, "inspect", out).ok(t, "inspect after an interrupted pass")

	// 2. A resume (nothing left to generate) begins at file 55; its 6th
	// file on are held; two signals stop it without waiting for them.
	g.arm(54+6, 4)
	p = startSynthgen(t, "stopped", args...)
	g.wait(t, p)
	p.signal(t, syscall.SIGINT)
	p.waitForOutput(t, true, draining, 2*time.Minute)
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 2*time.Minute); code != exitInterrupted {
		t.Fatalf("exit %d after two SIGINTs in the pass, want %d; stderr:\n%s", code, exitInterrupted, p.stderr(t))
	}
	g.release()
	hs.Wait()
	if kept := checkHiddenDir(t, out, units); len(kept) != 19 {
		t.Errorf("%d kept after the second signal, want 14 + 5 (the 4 in flight abandoned)", len(kept))
	}
	checkEnded(t, out, runfiles.StateInterrupted, exitInterrupted, 5, 14)
	asked := map[string]int{}
	for _, u := range units {
		asked[u.FileName()] = hs.Asked(u.IDs)
	}

	// 3. The last resume extracts the 21 not kept, and nothing else.
	before := readKept(t, out)
	r := startSynthgen(t, "resumed", args...)
	if code := r.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("resume exit %d; stderr:\n%s", code, r.stderr(t))
	}
	hs.Wait()
	kept := checkHiddenDir(t, out, units)
	if len(kept) != 40 {
		t.Errorf("%d kept, want 40", len(kept))
	}
	for _, u := range units {
		_, was := before[u.FileName()]
		switch n := hs.Asked(u.IDs) - asked[u.FileName()]; {
		case was && n != 0:
			t.Errorf("%s: kept before, asked %d times again", u.FileName(), n)
		case !was && n != 1:
			t.Errorf("%s: not kept before, asked %d times, want once", u.FileName(), n)
		}
	}
	checkEnded(t, out, runfiles.StateDone, 0, 21, 19)
	if ents, _ := os.ReadDir(hsDir); len(ents) != 0 {
		t.Errorf("server directory holds %d entries after the pass", len(ents))
	}
	_, page := httpGet(t, viewURL)
	checkFiguresAreTheReport(t, page, out)
	if strings.Contains(page, `class="live"`) {
		t.Errorf("the view says live after the pass ended")
	}
	ins := cliRun(t, "inspect", out)
	ins.ok(t, "inspect after the pass")
	if !strings.Contains(ins.stdout, "hidden states: 40 files kept") {
		t.Errorf("inspect does not name the 40 files kept:\n%s", ins.stdout)
	}
}

func sumBytes(m map[string]int64) int64 {
	var n int64
	for _, b := range m {
		n += b
	}
	return n
}
