package main

// The batch mode (batch.enabled) killed with SIGKILL at each step a batch
// takes, against the mock's Files and Batch APIs: while its creation is
// held, while its batches run, and in the middle of an output's download.
// After a resume every row is answered once and the mock saw each
// custom_id in one batch only.

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/batchapi"
	"github.com/synthgen/synthgen/sink/layout"
)

const batchModeRows = 30 // three batches of 10

func TestBatchModeKill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// stop returns once the run is where it is killed; after the kill,
		// then lets the server go on.
		stop func(t *testing.T, m *mock, p *proc) (after func())
	}{
		{"create held", func(t *testing.T, m *mock, p *proc) func() {
			defer ticking()()
			hold := m.Batches().HoldCreate(false)
			waitHeld(t, hold, p)
			// Nothing is created: the server drops each held create once
			// it sees the killed client gone. Released before it has seen
			// that, a create could still go through, after the resume
			// looked for it (a server that commits a dead client's create
			// late: not this case).
			return func() {
				if err := hold.WaitGone(time.Minute); err != nil {
					t.Fatal(err)
				}
				hold.Release()
			}
		}},
		{"created, answer held", func(t *testing.T, m *mock, p *proc) func() {
			defer ticking()()
			hold := m.Batches().HoldCreate(true)
			waitHeld(t, hold, p)
			return hold.Release
		}},
		{"batches running", func(t *testing.T, m *mock, p *proc) func() {
			p.waitForOutput(t, true, regexp.MustCompile(`(?s)(submitted as.*){3}`), time.Minute)
			return func() {}
		}},
		{"download held", func(t *testing.T, m *mock, p *proc) func() {
			defer ticking()()
			hold := m.Batches().HoldContent(100)
			waitHeld(t, hold, p)
			return hold.Release
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMock(t, mockserver.Options{Seed: 1, Batch: batchapi.Options{InProgress: time.Hour, Clock: batchNow}})
			dir := t.TempDir()
			args := []string{"run", "--dataset.path", writeShareGPT(t, dir, batchModeRows),
				"--endpoint.base_url", m.BaseURL, "--output.dir", dir + "/out", "--generation.max_tokens", "50",
				"--batch.enabled", "--batch.max_requests", "10", "--batch.in_flight", "3", "--batch.poll_interval", "5ms"}
			p := startSynthgen(t, "first", args...)
			after := tc.stop(t, m, p)
			p.signal(t, syscall.SIGKILL)
			p.wait(t, time.Minute)
			after()
			stop := ticking()
			r := startSynthgen(t, "resume", args...)
			code := r.wait(t, 2*time.Minute)
			stop()
			if code != 0 {
				t.Fatalf("resume: exit %d; stderr:\n%s", code, r.stderr(t))
			}
			checkComplete(t, dir+"/out", batchModeRows, mockserver.DefaultModel)
			checkBatchHeader(t, r.stderr(t), tc.name != "create held")
			sub := m.Batches().Submitted()
			if len(sub) != batchModeRows {
				t.Errorf("%d custom_ids submitted, want %d", len(sub), batchModeRows)
			}
			for id, n := range sub {
				if n != 1 {
					t.Errorf("custom_id %s submitted %d times", id, n)
				}
			}
			if t.Failed() {
				t.Logf("first run:\n%s\nresume:\n%s", p.stderr(t), r.stderr(t))
			}
		})
	}
}

// batchClock is the mock's batch clock, moved by the tests (nanoseconds
// past its start); a batch runs an hour on it.
var batchClock atomic.Int64

var batchStart = time.Unix(1_800_000_000, 0)

func batchNow() time.Time { return batchStart.Add(time.Duration(batchClock.Load())) }

// ticking moves batchClock on by a minute a millisecond until stopped:
// every batch created meanwhile ends.
func ticking() (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				batchClock.Add(int64(time.Minute))
			}
		}
	}()
	return func() { close(done); <-ended }
}

func waitHeld(t *testing.T, hold *batchapi.Hold, p *proc) {
	t.Helper()
	select {
	case <-hold.Reached():
	case <-time.After(time.Minute):
		t.Fatalf("the run never reached the hold; stderr:\n%s", strings.TrimSpace(p.stderr(t)))
	}
}

// checkBatchHeader: the batch mode's header says batches, not a pool's
// "in flight" count no server sees, and a resume that collects batches an
// earlier run submitted says so after the header, not before it.
func checkBatchHeader(t *testing.T, stderr string, collects bool) {
	t.Helper()
	head, _, _ := strings.Cut(stderr, "\n")
	if !strings.HasPrefix(head, "synthgen ") || !strings.Contains(head, "batch mode: up to 10 requests a batch, 3 batches at once") {
		t.Errorf("first line %q: want the header, naming the batch mode's sizes", head)
	}
	if strings.Contains(head, "in flight") {
		t.Errorf("header %q counts the pool as in flight", head)
	}
	if collects && !strings.Contains(stderr, "\nbatch: collecting ") {
		t.Errorf("a resume collecting earlier batches did not say so after its header:\n%s", stderr)
	}
}

// TestBatchModeCountsWhileInProgress: counts that rise while a batch's
// status stays in_progress reach the ledger's request_counts, status.json
// and the progress line, not only at the status's next change. The
// mock's clock is moved by hand: half the batch's time is half its lines.
func TestBatchModeCountsWhileInProgress(t *testing.T) {
	m := startMock(t, mockserver.Options{Seed: 1, Batch: batchapi.Options{InProgress: time.Hour, Clock: batchNow}})
	dir := t.TempDir()
	out := dir + "/out"
	p := startSynthgen(t, "run", "run", "--dataset.path", writeShareGPT(t, dir, 10),
		"--endpoint.base_url", m.BaseURL, "--output.dir", out, "--generation.max_tokens", "50",
		"--batch.enabled", "--batch.max_requests", "10", "--batch.poll_interval", "5ms", "--progress.interval", "20ms")
	p.waitForOutput(t, true, regexp.MustCompile(`batch 1: in_progress, 0 of 10 done`), time.Minute)
	batchClock.Add(int64(30 * time.Minute))
	p.waitForOutput(t, true, regexp.MustCompile(`batch 1: in_progress, 5 of 10 done, 0 failed`), time.Minute)
	// The progress lines (on stdout) name the batch's count.
	p.waitForOutput(t, false, regexp.MustCompile(`\| batches 1 in_progress \(5/10\)`), time.Minute)
	es, err := runfiles.ReadBatches(out)
	if err != nil || len(es) != 1 || es[0].Status != "in_progress" || es[0].Counts != (runfiles.BatchCounts{Total: 10, Completed: 5}) {
		t.Errorf("batches.json: %+v (%v), want batch 1 in_progress with 5 of 10 completed", es, err)
	}
	waitStatusBatch(t, out, runstats.BatchRecord{Number: 1, State: "submitted", Status: "in_progress", Requests: 10, Completed: 5})
	stop := ticking()
	code := p.wait(t, time.Minute)
	stop()
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr(t))
	}
	checkComplete(t, out, 10, mockserver.DefaultModel)
}

// waitStatusBatch waits until status.json (rewritten every
// progress.interval) shows want as its one batch.
func waitStatusBatch(t *testing.T, out string, want runstats.BatchRecord) {
	t.Helper()
	var got struct{ Batches []runstats.BatchRecord }
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(layout.Dir(out).Status())
		if err == nil && json.Unmarshal(b, &got) == nil && len(got.Batches) == 1 && got.Batches[0] == want {
			return
		}
	}
	t.Errorf("status.json's batches %+v, want %+v", got.Batches, want)
}
