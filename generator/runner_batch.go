package generator

import (
	"errors"
	"io"
	"net/http"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/pool"
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
	if o.Log == nil {
		o.Log = s.Log
	}
	b, err := batch.Open(o)
	if err != nil {
		return err
	}
	r.batch = b
	targets[0].Client = b
	return nil
}

// source is what the pool reads: in the batch mode, the dataset telling
// the Batcher when it ends.
func (r *Runner) source() pool.Source {
	if r.batch == nil {
		return r.src
	}
	return endSignal{r.src, r.batch.SourceEnded}
}

type endSignal struct {
	pool.Source
	end func()
}

func (s endSignal) Next() (dataset.Prompt, error) {
	p, err := s.Source.Next()
	if err == io.EOF {
		s.end()
	}
	return p, err
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
