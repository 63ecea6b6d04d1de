// Command bench runs synthgen's end-to-end scenarios against the built-in
// mock on loopback, each beside a minimal client loop (the yardstick) in
// the same run, and prints one table and a JSON file of the figures, the
// targets and whether each was met.
//
//	go run ./bench                  # the full run (make bench), about 6 minutes
//	go run ./bench -size tiny       # every scenario at a tiny size: proves they work
//	go run ./bench -only streaming  # one scenario
//	go run ./bench -only zero-latency -base 3318c3a  # this build against another commit's
//	go run ./bench -only instructions -base 3318c3a  # the same in instructions (needs valgrind)
//
// Every child (the mock, synthgen, the yardstick) is its own process, so its
// CPU time and peak RSS come from its own rusage. Ratios within one run are
// the figures that mean something: absolute ones move with the machine.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	yardstickMain()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := benchMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is what the flags choose.
type config struct {
	size    sizes
	only    string
	whole   bool   // -size full and every scenario: the run bench/results.json holds
	bin     string // synthgen binary
	base    string // -base: the other commit of a paired run (empty: not paired)
	baseBin string // its synthgen binary
	json    string // results file
	work    string // temp dir of datasets and output dirs
	log     io.Writer
	machine machine
}

func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "full", "full (the targets are for this size) or tiny (proves the scenarios work, in seconds)")
	only := fs.String("only", "", "run one scenario: "+strings.Join(scenarioNames(), ", ")+" (instructions runs only when named: it needs valgrind)")
	bin := fs.String("bin", "", "the synthgen binary to measure (empty: go build ./cmd/synthgen into a temp dir)")
	out := fs.String("json", "", "where to write the results (empty: bench/results.json in the module after a whole run at -size full, unpaired; none after any other run, whose rows would replace the whole run's)")
	keep := fs.Bool("keep", false, "keep the temp dir of datasets and output dirs (its path is printed)")
	base := fs.String("base", "", "a git commit to pair with: its synthgen is built too and run in turn with this one (needs -only, a scenario that pairs: "+strings.Join(pairedNames(), ", ")+")")
	baseBin := fs.String("base-bin", "", "like -base, with that commit's synthgen binary already built")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sz, ok := sizeByName[*size]
	if !ok {
		fmt.Fprintf(stderr, "bench: -size %q: want full or tiny\n", *size)
		return 2
	}
	if *only != "" && !slices.Contains(scenarioNames(), *only) {
		fmt.Fprintf(stderr, "bench: -only %q: want one of %s\n", *only, strings.Join(scenarioNames(), ", "))
		return 2
	}
	if err := checkPairing(*only, *base, *baseBin); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	work, err := os.MkdirTemp("", "synthgen-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "bench: temp dir: %v\n", err)
		return 1
	}
	if *keep {
		fmt.Fprintf(stderr, "bench: datasets and output dirs in %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	cfg := &config{size: sz, whole: *size == "full" && *only == "", only: *only, bin: *bin, base: *base, baseBin: *baseBin, json: *out, work: work, log: stderr}
	if err := cfg.prepare(ctx); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	var rows []row
	for _, sc := range scenarios {
		if (cfg.only != "" || sc.alone) && sc.name != cfg.only {
			continue
		}
		fmt.Fprintf(stderr, "bench: %s ...\n", sc.name)
		t0 := time.Now()
		got, err := sc.run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "bench: scenario %s: %v\n", sc.name, err)
			return 1
		}
		fmt.Fprintf(stderr, "bench: %s done in %.1f s\n", sc.name, time.Since(t0).Seconds())
		rows = append(rows, got...)
	}
	printTable(stdout, rows)
	res := results{Size: *size, Machine: cfg.machine, Base: cfg.base, Results: rows}
	if cfg.json == "" { // bench/results.json is the whole run's
		fmt.Fprintf(stdout, "\n%s; %s\n", cfg.machine, cfg.notWritten())
		return 0
	}
	if err := res.write(cfg.json); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\n%s; written to %s\n", cfg.machine, cfg.json)
	return 0
}

// prepare finds the module, builds synthgen unless -bin names it, and
// describes the machine.
func (c *config) prepare(ctx context.Context) error {
	root, err := moduleRoot(ctx)
	if err != nil && (c.bin == "" || c.json == "") {
		return err
	}
	c.json = c.resultsPath(root)
	if c.bin == "" {
		c.bin = filepath.Join(c.work, "synthgen")
		if err := build(ctx, root, describe(ctx, root, "--dirty"), c.bin); err != nil {
			return err
		}
	}
	if _, err := os.Stat(c.bin); err != nil {
		return fmt.Errorf("-bin %s: %w", c.bin, err)
	}
	if err := c.prepareBase(ctx, root); err != nil {
		return err
	}
	c.machine = describeMachine(ctx, c.bin)
	return nil
}

// resultsPath is where the run's rows go: -json, or bench/results.json
// for a whole run at -size full (never paired: -base needs -only), or
// nowhere ("").
func (c *config) resultsPath(root string) string {
	if c.json != "" || !c.whole {
		return c.json
	}
	return filepath.Join(root, "bench", "results.json")
}

// notWritten says why a run without -json wrote no results file.
func (c *config) notWritten() string {
	if c.base != "" || c.baseBin != "" {
		return "paired with " + cmp.Or(c.base, c.baseBin) + "; no results file (-json names one)"
	}
	return "not written to bench/results.json, which holds a whole run at -size full (-json names a file)"
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the synthgen module: run from the repository (go run ./bench), or pass -bin and -json")
	}
	return filepath.Dir(mod), nil
}

// machine is where a run ran: its figures mean something only with it.
type machine struct {
	CPUs      int    `json:"nproc"`
	CPU       string `json:"cpu_model"`
	Go        string `json:"go_version"`
	OS        string `json:"os"`
	Synthgen  string `json:"synthgen_version"`
	Date      string `json:"date"`
	LoadStart string `json:"loadavg_at_start"`
}

func (m machine) String() string {
	return fmt.Sprintf("%d CPUs (%s), %s, %s, synthgen %s, %s, load average at start %s",
		m.CPUs, m.CPU, m.Go, m.OS, m.Synthgen, m.Date, m.LoadStart)
}

func describeMachine(ctx context.Context, bin string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format(time.RFC3339), CPU: "unknown", Synthgen: "unknown", LoadStart: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadStart = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.CommandContext(ctx, bin, "version").Output(); err == nil {
		m.Synthgen = strings.TrimPrefix(strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), "synthgen ")
	}
	return m
}

// row is one figure of one scenario. Yardstick and Ratio are null for a
// figure with an absolute target; Pass is null for a figure with none.
type row struct {
	Scenario  string   `json:"scenario"`
	Figure    string   `json:"figure"`
	Synthgen  float64  `json:"synthgen"`
	Yardstick *float64 `json:"yardstick"`
	Ratio     *float64 `json:"ratio"`
	Target    string   `json:"target"`
	Pass      *bool    `json:"pass"`
	// In a paired run (-base), the other commit's figure (its own ratio to
	// the yardstick is this ratio's Synthgen over Base) and this build's
	// over it.
	Base   *float64 `json:"base,omitempty"`
	VsBase *float64 `json:"vs_base,omitempty"`
}

// target is a bound on a ratio (or, with no yardstick, on the value).
type target struct {
	max bool // the figure must be at most limit (else at least)
	lim float64
	x   bool // the bound is on the ratio: printed with an x
}

func atMost(v float64) *target   { return &target{max: true, lim: v} }
func atMostX(v float64) *target  { return &target{max: true, lim: v, x: true} }
func atLeastX(v float64) *target { return &target{lim: v, x: true} }
func (t *target) String() string {
	if t == nil {
		return ""
	}
	op := ">="
	if t.max {
		op = "<="
	}
	if t.x {
		return fmt.Sprintf("%s %gx", op, t.lim)
	}
	return fmt.Sprintf("%s %g", op, t.lim)
}

func (t *target) met(v float64) *bool {
	if t == nil {
		return nil
	}
	ok := v >= t.lim
	if t.max {
		ok = v <= t.lim
	}
	return &ok
}

// compare is a figure beside its yardstick: the ratio is synthgen's over
// the yardstick's, and the target bounds it.
func compare(scenario, figure string, synthgen, yardstick float64, t *target) row {
	r := row{Scenario: scenario, Figure: figure, Synthgen: synthgen, Target: t.String()}
	y := yardstick
	r.Yardstick = &y
	if yardstick != 0 {
		ratio := synthgen / yardstick
		r.Ratio = &ratio
		r.Pass = t.met(ratio)
	}
	return r
}

// absolute is a figure with no yardstick: the target bounds the value.
func absolute(scenario, figure string, v float64, t *target) row {
	return row{Scenario: scenario, Figure: figure, Synthgen: v, Target: t.String(), Pass: t.met(v)}
}

func printTable(w io.Writer, rows []row) {
	paired := slices.ContainsFunc(rows, func(r row) bool { return r.Base != nil })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "scenario\tfigure\tsynthgen\tyardstick\tratio\ttarget\tpass"
	if paired {
		head += "\tbase\tvs base"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		t := r.Target
		if t == "" {
			t = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Scenario, r.Figure, num(r.Synthgen),
			numOr(r.Yardstick), ratioOr(r.Ratio), t, passOr(r.Pass))
		if paired {
			fmt.Fprintf(tw, "\t%s\t%s", numOr(r.Base), ratioOr(r.VsBase))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func numOr(v *float64) string {
	if v == nil {
		return "-"
	}
	return num(*v)
}

func ratioOr(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3fx", *v)
}

func passOr(p *bool) string {
	if p == nil {
		return "-"
	}
	return map[bool]string{true: "yes", false: "NO"}[*p]
}

// num prints a figure with three significant digits or more.
func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

type results struct {
	Size    string  `json:"size"`
	Base    string  `json:"base,omitempty"` // the commit a paired run measured against
	Machine machine `json:"machine"`
	Results []row   `json:"results"`
}

func (r results) write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the results: %w", err)
	}
	return nil
}
