package generator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// TestAutoWithoutMetricsAgainstALimitedMock: concurrency: auto against a
// mock that serves no /metrics (404) and keeps 600 requests a minute (a
// full minute's bucket at start, then 10 a second) runs 640 rows past the
// bucket: the run ends done, every row is on disk exactly once, at most
// 10% of the requests were answered 429, and status says, once, that the
// answers steer and why. Judged by counts, not by time.
func TestAutoWithoutMetricsAgainstALimitedMock(t *testing.T) {
	const rows = 640
	m := mockserver.New(mockserver.Options{MeanTokens: 4, Seed: 1, RPM: 600, NoMetrics: true})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, `{"id":"r%d","messages":[{"role":"user","content":"q%d"}]}`+"\n", i, i)
	}
	data := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stats := runstats.NewStats(nil)
	var log strings.Builder
	out := filepath.Join(dir, "out")
	scraper := promscrape.NewScraper(ts.URL+"/metrics", nil)
	r, err := Open(ctx, Setup{
		Stats: stats,
		Job: job.Job{
			Selection: dataset.Selection{Path: data, Format: "messages", IDField: "id"},
			Sampling:  job.Sampling{Model: mockserver.DefaultModel, MaxTokens: 8, Samples: 1},
		},
		BaseURL: ts.URL + "/v1", Concurrency: 64, Auto: true, Stream: true,
		Metrics:      []autoconc.Endpoint{{URL: scraper.URL(), Scrape: scraper.Scrape}},
		AutoInterval: 50 * time.Millisecond, AutoLog: &log,
		Retry: pool.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
		Dir:   out, Format: "jsonl", PartSize: 1000, SyncInterval: 10 * time.Millisecond,
		Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, Hooks{Final: func() runstats.ProgressRecord { return runstats.NewProgressRecord(stats.Snapshot(), nil) }})
	if err != nil || res.Outcome != OutcomeDone {
		t.Fatalf("run: %v, outcome %v (%v)\n%s", err, res.Outcome, res.Err, log.String())
	}
	seen := readIDs(t, out)
	for i := range rows {
		if n := seen[fmt.Sprintf("r%d", i)]; n != 1 {
			t.Errorf("row r%d is on disk %d times, want once", i, n)
		}
	}
	if len(seen) != rows {
		t.Errorf("%d ids on disk, want %d", len(seen), rows)
	}
	ms := m.Stats()
	if sent := ms.Requests + ms.Limited; ms.Limited*10 > sent {
		t.Errorf("%d of %d requests answered 429, more than 10%%\n%s", ms.Limited, sent, log.String())
	}
	want := "no /metrics at " + ts.URL + "/metrics (404 Not Found): steering by 429s and latency, ceiling 64"
	if got := strings.Count(log.String(), want); got != 1 {
		t.Errorf("the log says %d times %q, want once:\n%s", got, want, log.String())
	}
	if rec := r.Auto().Record(); rec.Steering != want {
		t.Errorf("status's steering %q, want %q", rec.Steering, want)
	}
	t.Logf("%d requests, %d answered 429; limit %d (%s)", ms.Requests+ms.Limited, ms.Limited, r.Auto().Record().Limit, r.Auto().Record().Reason)
}

// readIDs counts the records of each id in a run's JSONL parts (not its
// history.jsonl).
func readIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") || d.Name() == "history.jsonl" {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			seen[rec.ID]++
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}
