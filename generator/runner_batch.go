package generator

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
)

// openBatch makes the batch mode's Completer (Setup.Batch) the endpoint's
// client, once the directory is locked: its ledger is the directory's.
func (r *Runner) openBatch(targets []pool.Endpoint) error {
	s := r.setup
	if len(targets) != 1 {
		return errors.New("batch.enabled: a batch goes to one endpoint.base_url, not several")
	}
	o := *s.Batch
	o.Dir = s.Dir
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig, tr.ResponseHeaderTimeout = s.TLS, s.Timeout
	o.API = &batch.API{Base: s.baseURLs()[0], Key: s.APIKey, HTTP: &http.Client{Transport: tr}}
	o.Slots = s.Concurrency
	o.InFlight = func() int64 { return s.Stats.Snapshot().InFlight }
	o.Left = func() int64 {
		snap := s.Stats.Snapshot()
		return snap.Total - snap.Done - snap.Errors
	}
	if o.Log == nil {
		o.Log = s.Log
	}
	o.OnChange = func(es []batch.Entry) { s.Stats.SetBatches(batchRecords(es)) }
	b, err := batch.Open(o)
	if err != nil {
		return err
	}
	r.batch = b
	targets[0].Client = b
	return nil
}

// closeBatch stops the batch mode's goroutines; after a run that wrote
// every answer it had (done or incomplete, closed), its downloaded batches
// are collected.
func (r *Runner) closeBatch(res Result) error {
	if r.batch == nil {
		return nil
	}
	clean := res.CloseErr == nil && (res.Outcome == OutcomeDone || res.Outcome == OutcomeIncomplete)
	return r.batch.Close(clean)
}

// batchRecords are the batches as the progress record shows them.
func batchRecords(es []batch.Entry) []runstats.BatchRecord {
	out := make([]runstats.BatchRecord, len(es))
	for i, e := range es {
		out[i] = runstats.BatchRecord{Number: e.Number, State: string(e.State), Status: e.Status,
			Requests: e.Requests, Completed: e.Counts.Completed, Failed: e.Counts.Failed}
	}
	return out
}

// batchStops is ctx, ended early when a batch stops the run
// (batch.Batcher.Stopped: an output that cannot be downloaded); done ends
// the watch and returns that error, nil when none came.
func (r *Runner) batchStops(ctx context.Context) (_ context.Context, done func() error) {
	if r.batch == nil {
		return ctx, func() error { return nil }
	}
	ctx, cancel := context.WithCancelCause(ctx)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case err := <-r.batch.Stopped():
			cancel(err)
		case <-quit:
		}
	})
	return ctx, func() error {
		close(quit)
		wg.Wait()
		err := context.Cause(ctx)
		cancel(nil)
		if errors.Is(err, batch.ErrStuck) {
			return err
		}
		return nil
	}
}
