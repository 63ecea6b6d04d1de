package generator

// An output file the provider will not hand over (500 on every download):
// said once, naming the batch and the file, and the run ends with an error
// once its failures pass the outage bound, keeping the batch in the ledger
// for the same command to collect later, its rows never error records.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/mockserver"
)

func TestBatchDownloadFailingForever(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{Seed: 1})
	var mu sync.Mutex
	broken, refused := true, 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fail := broken && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/content")
		if fail {
			refused++
		}
		mu.Unlock()
		if fail {
			http.Error(w, `{"error":{"message":"storage is down"}}`, http.StatusInternalServerError)
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 10)
	s.Batch.After = instant
	log := &lineWaiter{want: "\x00", seen: make(chan struct{})}
	s.Log = log
	r, err := Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), Hooks{Final: func() runstats.ProgressRecord { return runstats.NewProgressRecord(s.Stats.Snapshot(), nil) }})
	es, lerr := batch.ReadLedger(s.Dir)
	if lerr != nil || len(es) != 1 || es[0].State != batch.StateSubmitted {
		t.Fatalf("ledger %+v (%v), want the batch kept submitted", es, lerr)
	}
	if !errors.Is(err, batch.ErrStuck) || res.Outcome != OutcomeFailed ||
		!strings.Contains(err.Error(), es[0].BatchID) || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "the same command downloads it later") {
		t.Fatalf("run: %v (outcome %s), want it to stop naming the batch, the last error and what to do", err, res.Outcome)
	}
	if n := strings.Count(log.String(), "downloads failed, the last: download file "); n != 1 {
		t.Errorf("the failing download said %d times, want once:\n%s", n, log)
	}
	if strings.Count(log.String(), es[0].BatchID+": 5 downloads failed") != 1 {
		t.Errorf("the line does not name the file and the batch:\n%s", log)
	}
	mu.Lock()
	if refused < 600 { // 10 minutes of waits capped at a second
		t.Errorf("%d downloads tried, want the bound's 600 at least", refused)
	}
	broken = false
	mu.Unlock()
	if errs, _ := filepath.Glob(filepath.Join(s.Dir, "errors", "*")); len(errs) != 0 {
		t.Errorf("error records %v: the rows were answered", errs)
	}
	s = batchSetup(t, ts.URL, dir, 10)
	s.Batch.After = instant
	if res := runBatch(t, context.Background(), s); res.Outcome != OutcomeDone {
		t.Fatalf("the same command later: outcome %s, want done", res.Outcome)
	}
	checkOnce(t, m, s.Dir, 10)
}
