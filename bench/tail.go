package main

// The tail scenario: one mock with a continuous-batching model (at most
// tailRunning sequences, a step that grows with the batch: --token-delay
// x (1 + running/--batch-scale)) and answers with a long tail (mean 648
// tokens, up to 8,192), one job at tailRunning in flight. Its figure is
// the job's wall time over the least that model allows for the same work:
// the larger of the tokens over the model's best rate (tailRunning at
// once) and the longest answer made alone at a token a --token-delay.
// The answers' lengths are read back from the job's records.
//
// Then the same prompts as messages rows whose assistant turn is as long
// as the first job's answer to them (a word a token): a job that
// regenerates a dataset's answers, with generation.longest_first off and
// on. The mock's answer length is a function of the prompt and its seed,
// so each regenerated answer is exactly as long as its hint says: a
// regeneration's best case (a real model's answer is only near its
// dataset's).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	tj := tailJob{c: c, m: m, n: n, delay: delay, maxTokens: maxTokens}
	dir := filepath.Join(c.work, name)
	first, err := tj.run(ctx, job{data: data, dir: dir})
	if err != nil {
		return nil, err
	}
	rows := []row{first.row(name, "", nil)}
	hinted := filepath.Join(c.work, "tail-hinted.jsonl")
	if err := writeHinted(data, dir, hinted); err != nil {
		return nil, err
	}
	for _, on := range []bool{false, true} {
		flag := "--generation.longest_first=" + strconv.FormatBool(on)
		r, err := tj.run(ctx, job{data: hinted, dir: filepath.Join(c.work, fmt.Sprintf("%s-hinted-%v", name, on)),
			extra: []string{"--dataset.format", "messages", flag}})
		if err != nil {
			return nil, err
		}
		var t *target
		if on {
			// Hinted exactly (the mock answers each prompt as long as
			// before), the window leaves little of the tail.
			t = atMostX(1.25)
		}
		rows = append(rows, r.row(name, fmt.Sprintf(", rows hinted, longest_first %v", on), t))
	}
	return rows, nil
}

// tailJob runs one job of the tail scenario against its mock.
type tailJob struct {
	c         *config
	m         *mock
	n         int64
	delay     time.Duration
	maxTokens int
}

// tailRun is a job's wall time, the least the model allows for its
// answers, and their lengths.
type tailRun struct {
	wall, least      time.Duration
	n, mean, longest int
}

func (t tailJob) run(ctx context.Context, j job) (tailRun, error) {
	j.limit, j.format, j.maxTokens = t.n, "jsonl", t.maxTokens
	cmd := t.c.synthgen(ctx, t.m, j)
	// synthgen's --concurrency is the size's; this job holds the model's
	// batch full, no more.
	cmd.Args = append(cmd.Args, "--concurrency", strconv.Itoa(tailRunning))
	u, err := run(cmd, nil)
	if err != nil {
		return tailRun{}, err
	}
	answers, err := readAnswers(j.dir)
	if err != nil {
		return tailRun{}, err
	}
	if int64(len(answers)) != t.n {
		return tailRun{}, fmt.Errorf("tail: %s: %d records, want %d", j.dir, len(answers), t.n)
	}
	var total, longest int
	for _, l := range answers {
		total += l
		longest = max(longest, l)
	}
	step := float64(t.delay) * (1 + float64(tailRunning)/tailBatchScale)
	byRate := time.Duration(float64(total) * step / tailRunning)
	alone := time.Duration(longest) * t.delay
	return tailRun{wall: u.wall, least: max(byRate, alone), n: len(answers), mean: total / len(answers), longest: longest}, nil
}

func (r tailRun) row(name, what string, t *target) row {
	return compare(name, fmt.Sprintf("wall s over the model's least (%d answers, mean %d, longest %d tokens%s)", r.n, r.mean, r.longest, what),
		r.wall.Seconds(), r.least.Seconds(), t)
}

// writeHinted writes the prompts of data (prompt rows) as messages rows
// whose assistant turn has as many words as the answer to that prompt in
// dir's records had tokens (row ids are row indices).
func writeHinted(data, dir, path string) error {
	answers, err := readAnswers(dir)
	if err != nil {
		return err
	}
	in, err := os.Open(data)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for i := 0; sc.Scan(); i++ {
		var r struct {
			Prompt string `json:"prompt"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			out.Close()
			return fmt.Errorf("%s:%d: %w", data, i+1, err)
		}
		row := map[string]any{"messages": []map[string]string{
			{"role": "user", "content": r.Prompt},
			{"role": "assistant", "content": strings.Repeat("w ", answers[strconv.Itoa(i)])},
		}}
		b, _ := json.Marshal(row)
		w.Write(append(b, '\n'))
	}
	if err := sc.Err(); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", data, err)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readAnswers reads the completion tokens of every record under dir, by id.
func readAnswers(dir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "data", "part-*.jsonl"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r struct {
				ID               string `json:"id"`
				CompletionTokens int    `json:"completion_tokens"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				fh.Close()
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out[r.ID] = r.CompletionTokens
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return out, nil
}
