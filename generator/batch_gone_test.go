package generator

// A batch the provider no longer knows when a run resumes (404 on every
// look): abandoned in the ledger, said once, and its rows asked again in
// a new batch of the same run, not written as errors.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/batchapi"
)

// manualClock is a mock batch clock moved by the test alone.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) now() time.Time      { return time.Unix(1_800_000_000, c.ns.Load()) }
func (c *manualClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func instant(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

func TestBatchGoneOnResumeIsAskedAgain(t *testing.T) {
	t.Parallel()
	clock := &manualClock{}
	m := mockserver.New(mockserver.Options{Seed: 1, Batch: batchapi.Options{InProgress: time.Hour, Clock: clock.now}})
	var mu sync.Mutex
	lost, looks := "", 0 // the batch answered 404, and its looks
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gone := lost != "" && r.Method == http.MethodGet && r.URL.Path == "/v1/batches/"+lost
		if gone {
			looks++
		}
		mu.Unlock()
		if gone {
			http.Error(w, `{"error":{"message":"No batch found with id '`+lost+`'."}}`, http.StatusNotFound)
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	// The first run has a server of its own: a look it sent before its
	// stop may reach a server after it, and is not the resume's.
	first := httptest.NewServer(m)
	t.Cleanup(first.Close)
	dir := t.TempDir()
	s := batchSetup(t, first.URL, dir, 25)
	log := runUntilSubmitted(t, s, 3)
	es, err := batch.ReadLedger(s.Dir)
	if err != nil || len(es) != 3 {
		t.Fatalf("ledger %+v (%v), want three batches", es, err)
	}
	mu.Lock()
	lost = es[0].BatchID
	mu.Unlock()
	clock.add(2 * time.Hour) // the others end; a new batch ends at the next move
	s = batchSetup(t, ts.URL, dir, 25)
	s.Batch.After = instant
	log = &lineWaiter{want: ": submitted as", n: 1, seen: make(chan struct{})}
	s.Log = log
	go func() {
		<-log.seen // the new batch: let it end
		clock.add(2 * time.Hour)
	}()
	res := runBatch(t, context.Background(), s)
	if res.Outcome != OutcomeDone {
		t.Fatalf("resume: outcome %s, want done:\n%s", res.Outcome, log)
	}
	if got := recordCount(t, s.Dir); len(got) != 25 {
		t.Errorf("%d ids on disk, want 25", len(got))
	}
	sub := m.Batches().Submitted()
	twice := 0
	for _, n := range sub {
		twice += n - 1
	}
	if len(sub) != 25 || twice != es[0].Requests {
		t.Errorf("%d custom_ids submitted, %d twice; want 25, the lost batch's %d twice", len(sub), twice, es[0].Requests)
	}
	mu.Lock()
	if looks != 4 {
		t.Errorf("the lost batch was looked at %d times, want 4 (a 404 may pass)", looks)
	}
	mu.Unlock()
	said := fmt.Sprintf("batch 1: the provider no longer knows batch %s (404 on 4 tries", lost)
	if n := strings.Count(log.String(), said); n != 1 || !strings.Contains(log.String(), "abandoned in batches.json; its "+fmt.Sprint(es[0].Requests)+" requests, never answered, go again in a new batch") {
		t.Errorf("said %d times (want once, with what happens next):\n%s", n, log)
	}
	es, err = batch.ReadLedger(s.Dir)
	if err != nil || len(es) != 4 || es[0].State != batch.StateAbandoned || es[3].State != batch.StateCollected || es[3].Requests != es[0].Requests {
		t.Errorf("ledger %+v (%v), want batch 1 abandoned, its rows collected as batch 4", es, err)
	}
}
