package main

// The prefix scenario: three mock replicas that each keep a prefix cache
// (synthgen mock --prefix-cache), and the prefill they computed over the
// least any routing could (each prefix once), for prompts under six shared
// system prompts and for four samples of one prompt; and each replica's
// share of the answers. Whole conversations are measured by
// generator/pool's TestPlaceWholeConversations, which sees each request
// (their least depends on the answers).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	prefixReplicas   = 3
	prefixSysWords   = 400 // a long shared instruction
	prefixUserWords  = 20
	prefixRows       = 300
	prefixSampleRows = 90
	prefixSamples    = 4
)

// wordsOf is n distinct words under tag, as the mock counts tokens.
func wordsOf(tag string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = tag + strconv.Itoa(i)
	}
	return strings.Join(w, " ")
}

// writeMessages writes rows of {"messages": ...} to path.
func writeMessages(path string, rows [][]map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("dataset %s: %w", path, err)
	}
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(map[string]any{"messages": r}); err != nil {
			f.Close()
			return fmt.Errorf("dataset %s: %w", path, err)
		}
	}
	return f.Close()
}

func prefix(ctx context.Context, c *config) ([]row, error) {
	const name = "prefix"
	sys := make([][]map[string]string, prefixRows)
	for i := range sys {
		sys[i] = []map[string]string{
			{"role": "system", "content": wordsOf("s"+strconv.Itoa(i%6)+"_", prefixSysWords)},
			{"role": "user", "content": wordsOf("u"+strconv.Itoa(i)+"_", prefixUserWords)},
		}
	}
	samples := make([][]map[string]string, prefixSampleRows)
	for i := range samples {
		samples[i] = []map[string]string{{"role": "user", "content": wordsOf("p"+strconv.Itoa(i)+"_", 300)}}
	}
	cases := []struct {
		what     string
		rows     [][]map[string]string
		n        int
		together bool // the samples in one request carrying n
		least    float64
	}{
		{"300 prompts under 6 system prompts", sys, 1, false, 6*prefixSysWords + prefixRows*prefixUserWords},
		{"4 samples of one prompt", samples, prefixSamples, false, prefixSampleRows * 300},
		{"4 samples of one prompt in one request (n)", samples, prefixSamples, true, prefixSampleRows * 300},
	}
	var rows []row
	for k, cs := range cases {
		data := filepath.Join(c.work, fmt.Sprintf("prefix-%d.jsonl", k))
		if err := writeMessages(data, cs.rows); err != nil {
			return nil, err
		}
		computed, shares, err := c.prefixRun(ctx, data, len(cs.rows), cs.n, cs.together, filepath.Join(c.work, fmt.Sprintf("prefix-out-%d", k)))
		if err != nil {
			return nil, err
		}
		rows = append(rows,
			compare(name, cs.what+": prefill computed over the least", computed, cs.least, atMostX(1.15)),
			absolute(name, cs.what+": the least replica's share of answers", shares, &target{lim: 0.2}))
	}
	return rows, nil
}

// prefixRun runs one job against fresh replicas and returns the prefill
// they computed and the least replica's share of the answers (requests:
// with together, a prompt's samples are one request carrying n).
func (c *config) prefixRun(ctx context.Context, data string, rows, n int, together bool, dir string) (computed, least float64, err error) {
	var mocks []*mock
	defer func() {
		for _, m := range mocks {
			m.stop()
		}
	}()
	var urls []string
	for range prefixReplicas {
		m, err := startMock(ctx, c.bin, "--prefix-cache", "100000", "--mean-tokens", "16", "--ttft", "5ms", "--token-delay", "1ms")
		if err != nil {
			return 0, 0, err
		}
		mocks = append(mocks, m)
		urls = append(urls, m.base+"/v1")
	}
	cmd := exec.CommandContext(ctx, c.bin, "run", "--quiet",
		"--endpoint.base_url", strings.Join(urls, ","),
		"--dataset.path", data, "--dataset.format", "messages",
		"--generation.max_tokens", "16", "--generation.n", strconv.Itoa(n),
		// One request per sample: their placement is measured; together,
		// the server's computing the prompt once for n answers.
		"--generation.n_per_request="+strconv.FormatBool(together),
		"--concurrency", "24", "--output.dir", dir)
	cmd.Env = append(os.Environ(), "SYNTHGEN_ENDPOINT_BASE_URL=")
	if _, err := run(cmd, nil); err != nil {
		return 0, 0, err
	}
	var answers []float64
	var total float64
	for _, m := range mocks {
		q, err := m.metric("vllm:prefix_cache_queries_total")
		if err != nil {
			return 0, 0, err
		}
		h, err := m.metric("vllm:prefix_cache_hits_total")
		if err != nil {
			return 0, 0, err
		}
		a, err := m.metric("vllm:request_success_total")
		if err != nil {
			return 0, 0, err
		}
		computed += q - h
		answers = append(answers, a)
		total += a
	}
	want := float64(rows * n)
	if together {
		want = float64(rows)
	}
	if total != want {
		return 0, 0, fmt.Errorf("prefix: the replicas answered %.0f requests, want %.0f", total, want)
	}
	least = 1
	for _, a := range answers {
		least = min(least, a/total)
	}
	return computed, least, nil
}
