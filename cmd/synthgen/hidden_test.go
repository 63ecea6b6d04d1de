package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/hidden"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/internal/safetensors"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// TestHiddenStatesKill9Resume: 60 two-turn conversations with token ids,
// against a mock that writes hidden states as vLLM's connector does (locks
// left behind, 5% mismatched ids, 5% NaN, a file for every chat request
// too); the run is killed with SIGKILL while its hidden-state pass holds
// the 40th file's lock, then resumed. In the end every unit (turn) has one
// kept file with its prompt + answer ids and the server's values, no unit
// kept before the kill is asked again, the bytes the log reports are the
// files' sizes, and the server's directory holds nothing.
func TestHiddenStatesKill9Resume(t *testing.T) {
	t.Parallel()
	synthgenBinary(t)
	work := t.TempDir()
	ds := writeShareGPTTurns(t, work, 60, 2)
	out, hsDir := filepath.Join(work, "out"), filepath.Join(work, "hs")
	if err := os.Mkdir(hsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	const layers, size = 4, 8
	var gateOnce sync.Once
	reached, release := make(chan struct{}), make(chan struct{})
	var gateMu sync.Mutex
	gateAt := int64(-1) // set once generation is done: the 40th extraction file after it
	m := startMock(t, mockserver.Options{MeanTokens: 30, Seed: 3, HiddenStates: hiddenstates.Options{
		Dir: hsDir, Layers: layers, Hidden: size, RateMismatch: 0.05, RateNaN: 0.05, Seed: 3,
		Gate: func(n int64) {
			gateMu.Lock()
			at := gateAt
			gateMu.Unlock()
			if at > 0 && n == at {
				gateOnce.Do(func() { close(reached) })
				<-release
			}
		},
	}})
	args := []string{"run", "--dataset.path", ds, "--endpoint.base_url", m.BaseURL, "--output.dir", out,
		"--output.format", "jsonl", "--generation.turns", "all", "--generation.return_token_ids",
		"--generation.max_tokens", "100", "--concurrency", "8",
		"--hidden_states.enabled", "--hidden_states.dir", hsDir,
		"--hidden_states.layers", "4", "--hidden_states.hidden_size", "8",
		"--retry.max_attempts", "20", "--retry.initial_backoff", "1ms", "--retry.max_backoff", "5ms"}
	// The generation's chat requests begin 120 files; the gate is armed
	// for the 40th file after them (the hidden pass's 40th request).
	gateMu.Lock()
	gateAt = 120 + 40
	gateMu.Unlock()
	p := startSynthgen(t, "killed", args...)
	select {
	case <-reached:
	case <-p.done:
		t.Fatalf("run ended (exit %d) before the gate; stderr:\n%s", p.cmd.ProcessState.ExitCode(), p.stderr(t))
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	close(release)
	keptBefore := readKept(t, out)
	if len(keptBefore) == 0 {
		t.Fatalf("nothing kept before the kill; stderr:\n%s", p.stderr(t))
	}
	hs := m.HiddenStates()
	hs.Wait()
	askedBefore := map[string]int{}
	units, err := hidden.Units(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		askedBefore[u.FileName()] = hs.Asked(u.IDs)
	}

	r := startSynthgen(t, "resumed", args...)
	if code := r.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("resume exit %d; stderr:\n%s", code, r.stderr(t))
	}
	hs.Wait()
	if len(units) != 120 {
		t.Fatalf("%d units, want 120 (60 conversations of 2 turns)", len(units))
	}
	kept := readKept(t, out)
	var total int64
	for _, u := range units {
		name := u.FileName()
		e, ok := kept[name]
		if !ok {
			t.Errorf("%s: not kept", name)
			continue
		}
		if _, was := keptBefore[name]; was && hs.Asked(u.IDs) != askedBefore[name] {
			t.Errorf("%s: kept before the kill, asked again by the resume", name)
		}
		st, err := os.Stat(filepath.Join(out, hidden.DirName, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != e {
			t.Errorf("%s: %d bytes reported, %d on disk", name, e, st.Size())
		}
		total += st.Size()
		checkHiddenFile(t, filepath.Join(out, hidden.DirName, name), u.IDs, layers, size)
	}
	if len(kept) != len(units) {
		t.Errorf("%d kept for %d units", len(kept), len(units))
	}
	if !strings.Contains(r.stderr(t), "kept (") {
		t.Errorf("no hidden-state summary on stderr:\n%s", r.stderr(t))
	}
	if ents, _ := os.ReadDir(hsDir); len(ents) != 0 {
		t.Errorf("server directory holds %d entries after the pass", len(ents))
	}
	ins := cliRun(t, "inspect", out)
	ins.ok(t, "inspect of a run with hidden states") // DIR/hidden is no stranger to it
	if !strings.Contains(ins.stdout, fmt.Sprintf("hidden states: %d files kept", len(units))) || !strings.Contains(ins.stdout, fmt.Sprintf("(%d bytes)", total)) {
		t.Errorf("inspect does not say the files and bytes kept (%d):\n%s", total, ins.stdout)
	}
	var rep struct {
		Hidden runfiles.HiddenStatesRecord `json:"hidden_states"`
	}
	if b, err := os.ReadFile(filepath.Join(out, runfiles.ReportFile)); err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("report.json: %v", err)
	}
	if rep.Hidden.BytesKept != total || rep.Hidden.Units != len(units) || rep.Hidden.KeptBefore != len(keptBefore) || rep.Hidden.Kept != len(units)-len(keptBefore) {
		t.Errorf("report.json hidden_states %+v; the files hold %d bytes, %d kept before the kill", rep.Hidden, total, len(keptBefore))
	}
	c := hs.Counts()
	if c.Mismatched == 0 || c.NaN == 0 {
		t.Errorf("faults not exercised: %+v", c)
	}
	t.Logf("kept %d files, %d bytes; %d kept before the kill; server %+v", len(kept), total, len(keptBefore), c)
}

// readKept reads DIR/hidden/kept.jsonl: file name to bytes.
func readKept(t *testing.T, out string) map[string]int64 {
	t.Helper()
	f, err := os.Open(filepath.Join(out, hidden.DirName, hidden.LogName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log, err := hidden.OpenLog(filepath.Join(out, hidden.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	m := map[string]int64{}
	for name, e := range log.Files() {
		m[name] = e.Bytes
	}
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
	}
	if lines != len(m) {
		t.Errorf("%s: %d lines for %d units: a unit kept twice", hidden.LogName, lines, len(m))
	}
	return m
}

func checkHiddenFile(t *testing.T, path string, ids []int64, layers, size int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	got, err := f.Int64s("token_ids", 1<<20)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("%s: token_ids %v %v, want %d", path, got, err, len(ids))
	}
	hs := f.Tensors["hidden_states"]
	data := b[f.DataStart+hs.Begin : f.DataStart+hs.End]
	for p := range ids {
		if got[p] != ids[p] {
			t.Fatalf("%s: token_ids[%d] = %d, want %d", path, p, got[p], ids[p])
		}
		for l := range layers {
			for d := range size {
				if v := binary.LittleEndian.Uint16(data[2*((p*layers+l)*size+d):]); v != hiddenstates.Value(ids[p], p, l, d) {
					t.Fatalf("%s: [%d,%d,%d] = %#x, not the server's", path, p, l, d, v)
				}
			}
		}
	}
}

// TestHiddenStatesAfterFailedKeys: a run whose some keys failed for good
// still gives the records it wrote (in Parquet parts: the pass reads both
// formats) their states, and exits as a run with failed keys does (3).
func TestHiddenStatesAfterFailedKeys(t *testing.T) {
	work := t.TempDir()
	ds := writeShareGPT(t, work, 30)
	out, hsDir := filepath.Join(work, "out"), filepath.Join(work, "hs")
	if err := os.Mkdir(hsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := startMock(t, mockserver.Options{MeanTokens: 20, Seed: 5, Rate500: 0.2,
		HiddenStates: hiddenstates.Options{Dir: hsDir, Layers: 2, Hidden: 4}})
	res := cliRun(t, "run", "--dataset.path", ds, "--endpoint.base_url", m.BaseURL, "--output.dir", out,
		"--output.format", "parquet", "--generation.return_token_ids", "--retry.max_attempts", "1", "--concurrency", "4",
		"--hidden_states.enabled", "--hidden_states.dir", hsDir, "--hidden_states.layers", "2", "--hidden_states.hidden_size", "4")
	var ee *exitError
	if !errors.As(res.err, &ee) || ee.code != exitIncomplete {
		t.Fatalf("run = %v, want exit %d for failed keys; stderr:\n%s", res.err, exitIncomplete, res.stderr)
	}
	units, err := hidden.Units(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) == 0 || len(units) == 30 {
		t.Fatalf("%d records written of 30: the faults did not leave some failed", len(units))
	}
	if kept := readKept(t, out); len(kept) != len(units) {
		t.Errorf("%d files kept for %d records written", len(kept), len(units))
	}
}

// TestExportSpeculatorsHidden: a run with the hidden-state pass against
// the mock, then `export --format speculators-hidden`: one hs_<row> file
// per record, each the kept file's bytes with the record's ids; an
// existing --out is a usage error; a record whose kept file is gone is
// named on stderr and counted, and an export left with no file at all
// exits 1 with nothing written.
func TestExportSpeculatorsHidden(t *testing.T) {
	work := t.TempDir()
	ds := writeShareGPT(t, work, 12)
	out, hsDir := filepath.Join(work, "out"), filepath.Join(work, "hs")
	if err := os.Mkdir(hsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := startMock(t, mockserver.Options{MeanTokens: 20, Seed: 7, HiddenStates: hiddenstates.Options{Dir: hsDir, Layers: 2, Hidden: 4}})
	cliRun(t, "run", "--dataset.path", ds, "--endpoint.base_url", m.BaseURL, "--output.dir", out,
		"--output.format", "jsonl", "--generation.return_token_ids", "--concurrency", "4",
		"--hidden_states.enabled", "--hidden_states.dir", hsDir, "--hidden_states.layers", "2", "--hidden_states.hidden_size", "4").ok(t, "run")
	kept := readKept(t, out)
	if len(kept) != 12 {
		t.Fatalf("%d files kept, want 12", len(kept))
	}
	spec := filepath.Join(work, "spec")
	cliRun(t, "export", out, "--format", "speculators-hidden", "--out", spec).ok(t, "export")
	units, err := hidden.Units(out)
	if err != nil {
		t.Fatal(err)
	}
	// The rows are in key order: the ids here are row numbers, decimal,
	// which export orders as numbers; the units are in the parts' order.
	slices.SortFunc(units, func(a, b hidden.Unit) int {
		return cmp.Or(cmp.Compare(len(a.Key.ID), len(b.Key.ID)), cmp.Compare(a.Key.ID, b.Key.ID))
	})
	for i, u := range units {
		checkHiddenFile(t, filepath.Join(spec, "hidden_states", fmt.Sprintf("hs_%d.safetensors", i)), u.IDs, 2, 4)
	}
	if r := cliRun(t, "export", out, "--format", "speculators-hidden", "--out", spec); exitCode(r.err) != exitUsage {
		t.Errorf("export to an existing --out: exit %d (%v), want %d", exitCode(r.err), r.err, exitUsage)
	}

	// The first record's kept file and line gone: its row is named.
	gone := units[0]
	logPath := filepath.Join(out, hidden.DirName, hidden.LogName)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	var rest []string
	for _, l := range lines {
		if !strings.Contains(l, `"file":"`+gone.FileName()+`"`) {
			rest = append(rest, l)
		}
	}
	if len(rest) != len(lines)-1 {
		t.Fatalf("no kept line for %s", gone.FileName())
	}
	if err := os.WriteFile(logPath, []byte(strings.Join(rest, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, hidden.DirName, gone.FileName())); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, "export", out, "--format", "speculators-hidden", "--out", filepath.Join(work, "spec2"))
	r.ok(t, "export without one file")
	if !strings.Contains(r.stderr, gone.Key.ID+"_gen0") || !strings.Contains(r.stderr, "hidden_states") {
		t.Errorf("stderr does not name %s_gen0:\n%s", gone.Key.ID, r.stderr)
	}
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = cliRun(t, "export", out, "--format", "speculators-hidden", "--out", filepath.Join(work, "spec3"))
	if exitCode(r.err) != exitFailure {
		t.Errorf("export with no kept file: exit %d (%v), want %d", exitCode(r.err), r.err, exitFailure)
	}
	if _, err := os.Lstat(filepath.Join(work, "spec3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec3 written: %v", err)
	}
}
