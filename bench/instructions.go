package main

// The instructions scenario: zero-latency's job and streaming's streams
// with their CPU counted in instructions (valgrind's cachegrind), not in
// seconds.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// instructions runs zero-latency's job (the mock answers at once) under
// valgrind and counts the user-space instructions a request: synthgen's,
// the go-openai loop's and, paired, the base build's, in turn each round.
// A count does not move with what else the machine runs, as CPU time does
// (one build's CPU a request moved between 47 and 77 µs within minutes on
// the 2-core box), so it tells a change of 3% between two commits apart
// where a median of CPU times cannot. It leaves out what CPU time adds to
// it: the kernel's share, cache misses, another core's contention; the
// zero-latency scenario's figures are still the ones with targets.
//
// The scenario runs only when -only names it: it needs valgrind, and a
// process under it runs about 40 times slower.
func instructions(ctx context.Context, c *config) ([]row, error) {
	const name = "instructions"
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		return nil, errors.New("valgrind counts the instructions, and it is not installed (apt-get install valgrind)")
	}
	sz := c.size
	data, m, err := c.zeroMock(ctx, sz.instrN)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	var oa []usage
	sg := make([][]usage, len(c.bins()))
	k := counter{ctx, vg, c.work}
	plain := func(cmd *exec.Cmd, _ string) (usage, error) { return run(cmd, nil) }
	counted := func(cmd *exec.Cmd, tag string) (usage, error) { return k.count(cmd, tag, plain) }
	for round := range sz.instrRounds {
		loop, err := c.yardstick(ctx, m, openaiLoop, sz.instrN, answerTokens, false)
		if err != nil {
			return nil, err
		}
		u, err := counted(loop, fmt.Sprintf("loop-%d", round))
		if err != nil {
			return nil, err
		}
		oa = append(oa, u)
		if err := c.eachBin(round, func(i int, bin string) error {
			tag := fmt.Sprintf("%s-%d-%d", name, round, i)
			su, err := counted(c.synthgen(ctx, m, zeroJob(data, sz.instrN, bin, filepath.Join(c.work, tag))), tag)
			sg[i] = append(sg[i], su)
			return err
		}); err != nil {
			return nil, err
		}
	}
	perRequest := func(u usage) float64 { return float64(u.instructions) / float64(sz.instrN) }
	rows := []row{compare(name, fmt.Sprintf("instructions a request vs the go-openai loop (median of %d)", sz.instrRounds),
		median(sg[0], perRequest), median(oa, perRequest), nil)}
	rows = paired(name, rows, sg, []func(usage) float64{perRequest}, figure{"instructions a request", perRequest})
	streamRows, err := streamInstructions(ctx, c, k)
	return append(rows, streamRows...), err
}

// streamInstructions counts the instructions a chunk of streaming's
// streams (instrStreams of them), synthgen's, the bare reader's and,
// paired, the base's. Each process runs on one P: valgrind runs one thread
// at a time, and with two Ps the scheduler's spinning for work moved one
// build's count by 4% from run to run, with one by 0.6%.
func streamInstructions(ctx context.Context, c *config, k counter) ([]row, error) {
	const name = "instructions"
	sz := c.size
	data, m, err := c.streamMock(ctx, sz.instrStreams)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	one := func(cmd *exec.Cmd, tag string) (usage, error) {
		cmd.Env = append(cmd.Environ(), "GOMAXPROCS=1")
		return k.count(cmd, tag, m.run)
	}
	var bare []usage
	sg := make([][]usage, len(c.bins()))
	for round := range sz.instrRounds {
		loop, err := c.yardstick(ctx, m.mock, bareLoop, sz.instrStreams, streamMaxTokens, true)
		if err != nil {
			return nil, err
		}
		u, err := one(loop, fmt.Sprintf("bare-%d", round))
		if err != nil {
			return nil, err
		}
		bare = append(bare, u)
		if err := c.eachBin(round, func(i int, bin string) error {
			tag := fmt.Sprintf("%s-stream-%d-%d", name, round, i)
			j := job{data: data, limit: sz.instrStreams, stream: true, format: "jsonl", maxTokens: streamMaxTokens, bin: bin,
				dir: filepath.Join(c.work, tag)}
			su, err := one(c.synthgen(ctx, m.mock, j), tag)
			sg[i] = append(sg[i], su)
			return err
		}); err != nil {
			return nil, err
		}
	}
	perChunk := func(u usage) float64 { return float64(u.instructions) / m.chunks }
	rows := []row{compare(name, fmt.Sprintf("instructions a chunk vs the bare reader (%.0f chunks, median of %d)", m.chunks, sz.instrRounds),
		median(sg[0], perChunk), median(bare, perChunk), nil)}
	return paired(name, rows, sg, []func(usage) float64{perChunk}, figure{"instructions a chunk", perChunk}), nil
}

// counter counts the instructions of commands under valgrind's cachegrind.
type counter struct {
	ctx  context.Context
	vg   string // valgrind's path
	work string // where the counts are written
}

// count runs cmd under cachegrind, through runIt (run, or a chunkCount's),
// and reads the instructions it counted.
func (k counter) count(cmd *exec.Cmd, tag string, runIt func(*exec.Cmd, string) (usage, error)) (usage, error) {
	out := filepath.Join(k.work, tag+".cachegrind")
	u, err := runIt(underCachegrind(k.ctx, k.vg, cmd, out), tag)
	if err != nil {
		return u, err
	}
	u.instructions, err = cachegrindTotal(out)
	return u, err
}

// underCachegrind is cmd run by valgrind's cachegrind without its cache
// simulation (the instruction count alone, the fastest of its modes),
// writing its counts to out. Go's asynchronous preemption is off: its
// signals stop a Go program under valgrind.
func underCachegrind(ctx context.Context, valgrind string, cmd *exec.Cmd, out string) *exec.Cmd {
	args := append([]string{"--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=" + out, cmd.Path}, cmd.Args[1:]...)
	w := exec.CommandContext(ctx, valgrind, args...)
	w.Env = append(cmd.Environ(), "GODEBUG=asyncpreemptoff=1")
	w.Dir = cmd.Dir
	return w
}

// cachegrindTotal reads the instructions a cachegrind output file counts
// in all: its "summary:" line, whose first figure is Ir when "events:"
// starts with it.
func cachegrindTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	irFirst := false
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "events:"); ok {
			fields := strings.Fields(ev)
			irFirst = len(fields) > 0 && fields[0] == "Ir"
			continue
		}
		if sum, ok := strings.CutPrefix(line, "summary:"); ok {
			fields := strings.Fields(sum)
			if !irFirst || len(fields) == 0 {
				return 0, fmt.Errorf("%s: no instruction count (events: Ir) before its summary", path)
			}
			n, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: summary: %w", path, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return 0, fmt.Errorf("%s: no summary line: did valgrind end before the program did?", path)
}
