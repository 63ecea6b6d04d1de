package main

// The tail scenario: one mock with a continuous-batching model (at most
// tailRunning sequences, a step that grows with the batch: --token-delay
// x (1 + running/--batch-scale)) and answers with a long tail (mean 648
// tokens, up to 8,192), one job at tailRunning in flight. Its figure is
// the job's wall time over the least that model allows for the same work:
// the larger of the tokens over the model's best rate (tailRunning at
// once) and the longest answer made alone at a token a --token-delay.
// The answers' lengths are read back from the job's records.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const (
	tailRunning    = 64
	tailBatchScale = 400
	tailDelay      = 2 * time.Millisecond
	tailMean       = 648
	tailMax        = 8192
)

func tailScenario(ctx context.Context, c *config) ([]row, error) {
	const name = "tail"
	n, delay, maxTokens := int64(400), tailDelay, tailMax
	if c.size.rounds == 1 { // tiny: proves the scenario in about a second
		n, delay, maxTokens = 64, tailDelay/4, 1024
	}
	data, err := c.dataset(n, false)
	if err != nil {
		return nil, err
	}
	m, err := startMock(ctx, c.bin, "--token-delay", delay.String(), "--batch-scale", strconv.Itoa(tailBatchScale),
		"--max-running", strconv.Itoa(tailRunning), "--mean-tokens", strconv.Itoa(tailMean))
	if err != nil {
		return nil, err
	}
	defer m.stop()
	dir := filepath.Join(c.work, name)
	cmd := c.synthgen(ctx, m, job{data: data, limit: n, format: "jsonl", maxTokens: maxTokens, dir: dir})
	// synthgen's --concurrency is the size's; this job holds the model's
	// batch full, no more.
	cmd.Args = append(cmd.Args, "--concurrency", strconv.Itoa(tailRunning))
	u, err := run(cmd, nil)
	if err != nil {
		return nil, err
	}
	lengths, err := answerLengths(dir)
	if err != nil {
		return nil, err
	}
	if int64(len(lengths)) != n {
		return nil, fmt.Errorf("tail: %d records, want %d", len(lengths), n)
	}
	var total, longest int
	for _, l := range lengths {
		total += l
		longest = max(longest, l)
	}
	step := float64(delay) * (1 + float64(tailRunning)/tailBatchScale)
	byRate := time.Duration(float64(total) * step / tailRunning)
	alone := time.Duration(longest) * delay
	least := max(byRate, alone)
	return []row{
		compare(name, fmt.Sprintf("wall s over the model's least (%d answers, mean %d, longest %d tokens)", n, total/len(lengths), longest),
			u.wall.Seconds(), least.Seconds(), nil),
	}, nil
}

// answerLengths reads the completion tokens of every record under dir.
func answerLengths(dir string) ([]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "data", "part-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r struct {
				CompletionTokens int `json:"completion_tokens"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				fh.Close()
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, r.CompletionTokens)
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return out, nil
}
