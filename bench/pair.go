package main

// The paired mode (-base): this build and another commit's run in turn in
// one session, so a regression shows as a ratio between two commits of
// synthgen, not as a drift against a yardstick whose own speed moves from
// run to run on a shared machine.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pairedNames are the scenarios that run the base build beside this one.
func pairedNames() []string {
	var names []string
	for _, s := range scenarios {
		if s.paired {
			names = append(names, s.name)
		}
	}
	return names
}

// checkPairing refuses a paired run that would measure nothing paired.
func checkPairing(only, base, baseBin string) error {
	if base == "" && baseBin == "" {
		return nil
	}
	if base != "" && baseBin != "" {
		return errors.New("-base and -base-bin: give one")
	}
	for _, s := range scenarios {
		if s.name == only && s.paired {
			return nil
		}
	}
	return fmt.Errorf("-base needs -only with a scenario that pairs: %s", strings.Join(pairedNames(), ", "))
}

// prepareBase builds -base's synthgen from `git archive` of the commit,
// with the flags this build gets, into the work dir.
func (c *config) prepareBase(ctx context.Context, root string) error {
	if c.baseBin != "" {
		if c.base == "" {
			c.base = c.baseBin
		}
		_, err := os.Stat(c.baseBin)
		return err
	}
	if c.base == "" {
		return nil
	}
	src := filepath.Join(c.work, "base-src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, c.base, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("git archive %s: %w\n%s", c.base, err, out)
	}
	c.baseBin = filepath.Join(c.work, "synthgen-base")
	return build(ctx, src, describe(ctx, root, c.base), c.baseBin)
}

// build is `go build ./cmd/synthgen` in dir, with the version stamped as
// make build stamps it and the release build's configuration (buildEnv,
// buildFlags).
func build(ctx context.Context, dir, version, out string) error {
	args := append(append([]string{"build"}, buildFlags...), "-ldflags", "-X main.version="+version, "-o", out, "./cmd/synthgen")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), buildEnv...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/synthgen in %s: %w\n%s", dir, err, b)
	}
	return nil
}

// buildEnv and buildFlags are the Dockerfile's build configuration, which
// cmd/synthgen's tests also build with: in `make test`, the bench's build
// of synthgen then only links, where another configuration compiled every
// package again (52 s of a cold build cache on 2 cores). The two builds of
// a paired run get the same, so their paths do not differ either.
var (
	buildEnv   = []string{"CGO_ENABLED=0"}
	buildFlags = []string{"-trimpath"}
)

// describe names a commit as the version string does (git describe).
func describe(ctx context.Context, root, what string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--tags", "--always", what).Output()
	if err != nil {
		return "bench"
	}
	return strings.TrimSpace(string(out))
}

// pair sets a row's base figure and this build's ratio to it.
func pair(r row, base float64) row {
	b := base
	r.Base = &b
	if base != 0 {
		v := r.Synthgen / base
		r.VsBase = &v
	}
	return r
}

// bins are the synthgen builds a paired scenario runs in turn each round:
// this one, then the base if there is one.
func (c *config) bins() []string {
	if c.baseBin == "" {
		return []string{c.bin}
	}
	return []string{c.bin, c.baseBin}
}

// eachBin runs one round's synthgen runs, this build's (i 0) and, paired,
// the base's (i 1), which swap places each round: the build that always
// ran right after the yardsticks read 0.93x the CPU a request of its own
// parent, and 0.99x once they alternated.
func (c *config) eachBin(round int, run func(i int, bin string) error) error {
	bins := c.bins()
	for k := range bins {
		i := (k + round) % len(bins)
		if err := run(i, bins[i]); err != nil {
			return err
		}
	}
	return nil
}

// figure is one measure of a run, named as a row names it.
type figure struct {
	name string
	of   func(usage) float64
}

// paired gives each of rows (whose synthgen figure is the median of fs[i]
// over sg[0]) the base's median of the same figure and this build's ratio
// to it, and adds the round-by-round spread of each of spreads; rows
// unchanged when the run is not paired.
func paired(scenario string, rows []row, sg [][]usage, fs []func(usage) float64, spreads ...figure) []row {
	if len(sg) < 2 {
		return rows
	}
	for i, f := range fs {
		rows[i] = pair(rows[i], median(sg[1], f))
	}
	for _, f := range spreads {
		rows = append(rows, spread(scenario, f.name, sg, f.of)...)
	}
	return rows
}

// spread is the lowest and the highest of the rounds' own ratios, this
// build's run over the base's run of the same round: the medians alone
// hide how far a shared machine moved them.
func spread(scenario, figure string, runs [][]usage, f func(usage) float64) []row {
	lo, hi := math.Inf(1), math.Inf(-1)
	for r := range runs[0] {
		v := f(runs[0][r]) / f(runs[1][r])
		lo, hi = min(lo, v), max(hi, v)
	}
	return []row{
		absolute(scenario, figure+" vs base, round by round: lowest", lo, nil),
		absolute(scenario, figure+" vs base, round by round: highest", hi, nil),
	}
}
