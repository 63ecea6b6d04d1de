package generator

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// runRows runs a messages dataset of the given rows (bad ones are "{}",
// which has no messages) against a mock, to its end.
func runRows(t *testing.T, rows []bool) (Result, error) {
	t.Helper()
	ts := httptest.NewServer(mockserver.New(mockserver.Options{MeanTokens: 4, Seed: 1}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	var b strings.Builder
	for i, good := range rows {
		if good {
			fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d"}]}`+"\n", i)
		} else {
			b.WriteString("{}\n")
		}
	}
	data := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stats := runstats.NewStats(nil)
	r, err := Open(ctx, Setup{
		Stats: stats,
		Job: job.Job{
			Selection: dataset.Selection{Path: data, Format: "messages"},
			Sampling:  job.Sampling{Model: mockserver.DefaultModel, MaxTokens: 8, Samples: 1},
		},
		BaseURL: ts.URL + "/v1", Concurrency: 2, Stream: true,
		Retry: pool.RetryPolicy{MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
		Dir:   filepath.Join(dir, "out"), Format: "jsonl", PartSize: 100, SyncInterval: 10 * time.Millisecond,
		Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.Run(ctx, Hooks{Final: func() runstats.ProgressRecord { return runstats.NewProgressRecord(stats.Snapshot(), nil) }})
}

// TestAllBadRowsFail: a dataset whose rows are all bad, or whose first
// allBadRows are, fails the run (not "done 0/0"), naming the first bad
// row's error and what to check; a few bad rows among good ones do not.
func TestAllBadRowsFail(t *testing.T) {
	t.Parallel()
	bad := func(n int) []bool { return make([]bool, n) }
	for _, tc := range []struct {
		name string
		rows []bool
		want string // "" : the run is done
	}{
		{"all bad", bad(8), "every row read is bad (8 rows)"},
		{"first 100 bad", append(bad(allBadRows+20), true, true), fmt.Sprintf("the first %d rows read are all bad, none good (the run stops at %d)", allBadRows+20, allBadRows)},
		{"some bad", append(append(bad(3), true, true), bad(2)...), ""},
		{"bad, then good", append(bad(allBadRows-1), true), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := runRows(t, tc.rows)
			if tc.want == "" {
				if err != nil || res.Outcome != OutcomeDone {
					t.Fatalf("outcome %s, err %v: want done", res.Outcome, err)
				}
				return
			}
			var be *BadRowsError
			if !errors.As(err, &be) || res.Outcome != OutcomeFailed {
				t.Fatalf("outcome %s, err %v: want failed with a *BadRowsError", res.Outcome, err)
			}
			for _, part := range []string{tc.want, "rows.jsonl:1: messages", "check that dataset.format"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
			if res.Summary.Written != 0 {
				t.Errorf("%d written before the stop, want 0", res.Summary.Written)
			}
		})
	}
}
