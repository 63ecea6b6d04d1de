package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	yardstickMain() // the harness re-executes this test binary as the yardstick
	os.Exit(m.Run())
}

// TestScenariosTiny runs every scenario at the tiny size, end to end, and
// checks that the table and the JSON are there and sane. Whether the
// targets are met is the full run's business: a tiny run on a loaded
// machine says nothing about them.
func TestScenariosTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds synthgen and runs every scenario")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	if code := benchMain(ctx, []string{"-size", "tiny", "-json", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench -size tiny exited %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	table := stdout.String()
	if !strings.HasPrefix(table, "scenario") || !strings.Contains(table, "yardstick") {
		t.Errorf("the table has no header:\n%s", table)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	if res.Size != "tiny" || res.Machine.CPUs < 1 || res.Machine.Go == "" || res.Machine.Date == "" {
		t.Errorf("results say size %q and machine %+v", res.Size, res.Machine)
	}
	seen := map[string]int{}
	for _, r := range res.Results {
		seen[r.Scenario]++
		where := fmt.Sprintf("%s / %s", r.Scenario, r.Figure)
		if !strings.Contains(table, r.Figure) {
			t.Errorf("%s: in the JSON, not in the table", where)
		}
		if !(r.Synthgen > 0) || math.IsInf(r.Synthgen, 0) {
			// Every figure is a time, a rate, a size or a cost: none is 0.
			// The bytes per key may be anything (an RSS difference), so
			// it is checked for being a number only.
			// The close after the last answer may be shorter than the
			// poll that sees it: 0, never less.
			closing := strings.Contains(r.Figure, "last answer to exit") && r.Synthgen == 0
			if !closing && !(strings.Contains(r.Figure, "per key") && !math.IsNaN(r.Synthgen)) {
				t.Errorf("%s: synthgen figure %v", where, r.Synthgen)
			}
		}
		if (r.Yardstick == nil) != (r.Ratio == nil) {
			t.Errorf("%s: yardstick %v but ratio %v", where, r.Yardstick, r.Ratio)
		}
		if r.Yardstick != nil {
			if !(*r.Yardstick > 0) {
				t.Errorf("%s: yardstick figure %v", where, *r.Yardstick)
			} else if got, want := *r.Ratio, r.Synthgen / *r.Yardstick; math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s: ratio %v, want synthgen/yardstick = %v", where, got, want)
			}
		}
		if (r.Target == "") != (r.Pass == nil) {
			t.Errorf("%s: target %q but pass %v", where, r.Target, r.Pass)
		}
	}
	for _, sc := range scenarios {
		if sc.alone {
			continue // run only when -only names it (TestInstructionsTiny)
		}
		name := sc.name
		if seen[name] == 0 {
			t.Errorf("scenario %s has no row in %s", name, path)
		}
		if !strings.Contains(table, name) {
			t.Errorf("scenario %s is not in the table", name)
		}
	}
}

// TestYardstickCountsAndFails checks the yardstick against a real server:
// it counts data lines (not [DONE]), and a stream cut before [DONE] or a
// non-200 answer is a failure, so a yardstick that skipped work cannot
// flatter itself.
func TestYardstickCountsAndFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n")
		case "/cut":
			fmt.Fprint(w, "data: {\"a\":1}\n\n")
		default:
			http.Error(w, "no", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := runYardstick([]string{"-url", srv.URL + "/ok", "-n", "7", "-c", "3", "-stream"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "requests=7 chunks=14 failures=0"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, path := range []string{"/cut", "/503"} {
		out.Reset()
		err := runYardstick([]string{"-url", srv.URL + path, "-n", "4", "-c", "2", "-stream"}, &out)
		if err == nil || !strings.Contains(out.String(), "failures=4") {
			t.Errorf("%s: err %v, output %q: want 4 failures", path, err, out.String())
		}
	}
}

// TestMetricSums reads a counter the way the mock exports it, summed over
// its labels, and tells a longer name apart.
func TestMetricSums(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# HELP x\nvllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} 12\n"+
			"vllm:prompt_tokens_total_extra 100\nvllm:prompt_tokens_total{model_name=\"n\"} 3e+00\n")
	}))
	defer srv.Close()
	m := &mock{base: srv.URL}
	v, err := m.metric(promptTokensMetric)
	if err != nil || v != 15 {
		t.Errorf("got %v, %v; want 15", v, err)
	}
	if _, err := m.metric("vllm:absent_total"); err == nil {
		t.Error("an absent metric read without error")
	}
}

// TestDatasetMatchesYardstick: the dataset's prompts are the yardstick's,
// byte for byte, so that the mock answers both alike.
func TestDatasetMatchesYardstick(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.jsonl")
	if err := writeDataset(path, 3, true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, line := range lines {
		var row struct{ ID, Prompt string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		body := string(appendBody(nil, "m", int64(i), 8, false))
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatalf("body %d is not JSON: %v\n%s", i, err, body)
		}
		if len(req.Messages) != 1 || req.Messages[0].Content != row.Prompt || req.Messages[0].Role != "user" {
			t.Errorf("row %d: prompt %q, body %s", i, row.Prompt, body)
		}
		if len(row.ID) != 24 {
			t.Errorf("row %d: id %q, want 24 bytes", i, row.ID)
		}
	}
}

// TestPairing: -base is refused where no scenario would run it, and a
// paired row carries the base's figure, this build's ratio to it and the
// round-by-round spread, in the table and in the JSON.
func TestPairing(t *testing.T) {
	for _, c := range []struct {
		only, base, bin string
		ok              bool
	}{
		{"", "", "", true}, {"zero-latency", "3318c3a", "", true}, {"zero-latency", "", "/x", true},
		{"streaming", "3318c3a", "", true}, {"instructions", "3318c3a", "", true},
		{"", "3318c3a", "", false}, {"littles-law", "3318c3a", "", false}, {"zero-latency", "a", "/x", false},
	} {
		if err := checkPairing(c.only, c.base, c.bin); (err == nil) != c.ok {
			t.Errorf("checkPairing(%q, %q, %q) = %v, want ok %v", c.only, c.base, c.bin, err, c.ok)
		}
	}
	r := pair(compare("s", "CPU", 90, 100, atMostX(1.05)), 80)
	if *r.Base != 80 || *r.VsBase != 90.0/80 || *r.Ratio != 0.9 {
		t.Errorf("paired row %+v", r)
	}
	runs := [][]usage{{{cpu: 10}, {cpu: 12}, {cpu: 9}}, {{cpu: 10}, {cpu: 8}, {cpu: 10}}}
	sp := spread("s", "CPU", runs, func(u usage) float64 { return float64(u.cpu) })
	if len(sp) != 2 || sp[0].Synthgen != 0.9 || sp[1].Synthgen != 1.5 {
		t.Errorf("spread %+v, want 0.9 and 1.5", sp)
	}
	var out bytes.Buffer
	printTable(&out, append([]row{r}, sp...))
	if lines := strings.Split(out.String(), "\n"); !strings.HasSuffix(strings.TrimSpace(lines[0]), "vs base") ||
		!strings.Contains(lines[1], "1.125x") {
		t.Errorf("table:\n%s", &out)
	}
}

// TestResultsPath: only a whole run at -size full writes
// bench/results.json unasked; a run of one scenario, a tiny or a paired one
// would replace the whole run's rows with its few.
func TestResultsPath(t *testing.T) {
	want := filepath.Join("root", "bench", "results.json")
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{config{whole: true}, want},
		{config{whole: true, json: "x.json"}, "x.json"},
		{config{}, ""}, // -only, or -size tiny
		{config{json: "x.json"}, "x.json"},
	} {
		if got := c.cfg.resultsPath("root"); got != c.want {
			t.Errorf("%+v: results in %q, want %q", c.cfg, got, c.want)
		}
	}
}

// TestInstructionsTiny runs the instructions scenario (which only -only
// runs) at the tiny size, where valgrind is installed.
func TestInstructionsTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds synthgen and runs it under valgrind")
	}
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	if code := benchMain(ctx, []string{"-size", "tiny", "-only", "instructions", "-json", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench -only instructions exited %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 2 {
		t.Fatalf("want two rows (a request, a chunk), got %+v", res.Results)
	}
	// A request is tens of thousands of instructions in either program
	// (about 220,000 for synthgen at 5,000 requests), a streamed chunk
	// thousands (about 7,000 for synthgen, 3,000 for the bare reader, at
	// 1,000 streams): a count of a few would be a count of valgrind's
	// launcher, not of the run.
	for i, least := range []float64{10_000, 1_000} {
		if r := res.Results[i]; r.Synthgen < least || r.Yardstick == nil || *r.Yardstick < least {
			t.Errorf("%s: synthgen %v, yardstick %v", r.Figure, r.Synthgen, r.Yardstick)
		}
	}
}

func TestCachegrindTotal(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       int64 // 0: an error
	}{
		{"Ir alone", "desc: I1 cache: none\ncmd: ./sg run\nevents: Ir\nfl=/x.go\nfn=main\n1 5\nsummary: 1040284491\n", 1040284491},
		{"Ir first of several", "events: Ir I1mr ILmr\nsummary: 77 1 2\n", 77},
		{"no Ir", "events: Dr Dw\nsummary: 77 1\n", 0},
		{"no summary", "events: Ir\nfn=main\n1 5\n", 0},
		{"not a number", "events: Ir\nsummary: many\n", 0},
	} {
		path := filepath.Join(t.TempDir(), "cg.out")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := cachegrindTotal(path)
		if c.want == 0 {
			if err == nil {
				t.Errorf("%s: read %d, want an error", c.name, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

// TestBuildIsTheReleaseBuild holds the bench's build configuration to the
// Dockerfile's, which cmd/synthgen's tests build with too
// (TestDockerfileBuildsStatic): one compilation of the packages serves all.
func TestBuildIsTheReleaseBuild(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(append(append(slices.Clone(buildEnv), "go", "build"), buildFlags...), " ")
	if !strings.Contains(string(b), want) {
		t.Errorf("the Dockerfile has no %q: bench's build (buildEnv, buildFlags) and the release build differ", want)
	}
}
