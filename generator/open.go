package generator

// Open and its steps: pin the dataset, resolve the model against the
// endpoints, open the output directory, open the pool.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/internal/redact"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// Open prepares a run. ctx bounds the preparation (a Hub download, waiting
// for a server that is still loading); cancelling it returns ctx's error.
// Errors say what to fix: a *dataset.RowError or a dataset error, a
// *ModelError, a *ServerError, a *MismatchError, or the output directory's.
func Open(ctx context.Context, s Setup) (_ *Runner, err error) {
	r := &Runner{setup: s.withDefaults(), job: s.Job}
	opts, err := r.pin(ctx)
	if err != nil {
		return nil, err
	}
	eps, err := r.resolve(ctx)
	if err != nil {
		return nil, err
	}
	if err = r.openSink(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = r.out.Close()
		}
	}()
	if r.setup.Batch != nil {
		if err = r.openBatch(eps.targets); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = r.batch.Close(false)
			}
		}()
	}
	if err = r.openPool(eps, opts); err != nil {
		return nil, err
	}
	return r, nil
}

// withDefaults is s with what was left unset filled in.
func (s Setup) withDefaults() Setup {
	if s.Stats == nil {
		s.Stats = runstats.NewStats(nil)
	}
	if s.Log == nil {
		s.Log = io.Discard
	}
	if s.AutoLog == nil {
		s.AutoLog = s.Log
	}
	if s.Started.IsZero() {
		s.Started = time.Now()
	}
	return s
}

// pin is Open's first step: the dataset pinned to the revision it is read
// at, and its rows counted, so that the total is known before any request.
func (r *Runner) pin(ctx context.Context) (dataset.Options, error) {
	opts, err := r.pinDataset(ctx)
	if err != nil {
		return opts, err
	}
	if r.rows, err = dataset.Count(opts); err != nil {
		return opts, &DatasetError{Err: err}
	}
	r.setup.Stats.SetTotal(r.job.Total(r.rows))
	return opts, nil
}

// endpoints are the run's servers as resolve found them: a client each
// and the price of the model they serve (nil: none configured).
type endpoints struct {
	targets []pool.Endpoint
	clients []*wire.Client
	price   *runstats.Price
}

// resolve is Open's second step: a client per endpoint, and the model the
// job asks resolved against what they serve (its id, context and server
// kind), priced.
func (r *Runner) resolve(ctx context.Context) (endpoints, error) {
	s := r.setup
	urls := s.baseURLs()
	eps := endpoints{targets: make([]pool.Endpoint, len(urls)), clients: make([]*wire.Client, len(urls))}
	shown := make([]string, len(urls))
	var replicas *wire.Replicas // a replica silent while the others answer loses its streams
	if len(urls) > 1 {
		replicas = wire.NewReplicas()
	}
	for i, u := range urls {
		eps.clients[i] = wire.New(wire.Options{BaseURL: u, APIKey: s.APIKey, Timeout: s.Timeout, StallTimeout: s.StallTimeout, TLS: s.TLS, MaxConns: s.Concurrency, OnAwait: s.Stats.AddAwaiting, Replicas: replicas})
		shown[i] = redact.URL(u)
		eps.targets[i] = pool.Endpoint{URL: shown[i], Client: eps.clients[i]}
	}
	s.Stats.SetEndpoints(shown)
	model, err := wire.ResolveModels(ctx, eps.clients, urls, r.job.Sampling.Model, s.Log)
	if err != nil {
		return eps, err
	}
	r.job.Sampling.Model, r.maxModelLen = model.ID, model.MaxModelLen
	r.server = promscrape.KindOf(model.OwnedBy)
	s.Stats.SetMaxModelLen(model.MaxModelLen)
	if s.Price != nil {
		p, ok := s.Price(r.job.Sampling.Model)
		if !ok {
			return eps, fmt.Errorf("endpoint.price: no price for model %q, the one the job asks", r.job.Sampling.Model)
		}
		eps.price = &p
		s.Stats.SetPrice(p)
	}
	return eps, nil
}

// openSink is Open's third step: the output directory opened for the job
// (or refused as another's), and what it holds counted from the first
// status.json on. The producer passes the keys after the first one it asks
// only as the pool lets it read on (Stats.SeedHeld).
func (r *Runner) openSink() error {
	s := r.setup
	sj, err := r.job.ManifestEntry(s.Version, s.Config)
	if err != nil {
		return err
	}
	r.out, err = sink.Open(sink.Options{
		Dir:          s.Dir,
		Format:       s.Format,
		PartSize:     s.PartSize,
		SyncInterval: s.SyncInterval,
		Force:        s.Force,
		Job:          sj,
		Check:        r.job.Check(s.Dir, s.Force),
	})
	if err != nil {
		var me *job.MismatchError
		if errors.As(err, &me) {
			return err
		}
		return fmt.Errorf("open output %s: %w", s.Dir, err)
	}
	keys := r.job.Total(r.rows)
	held, failed := min(int64(r.out.DoneCount()), keys), int64(0)
	if !s.RetryErrors {
		failed = min(int64(r.out.FailedCount()), keys-held)
	}
	s.Stats.SeedHeld(held, failed)
	return nil
}

// openPool is Open's last step: the engine over the endpoints, the
// dataset's reader, status.json, and each endpoint's /metrics shared by
// every reader for half the fastest reader's interval.
func (r *Runner) openPool(eps endpoints, opts dataset.Options) (err error) {
	s := r.setup
	r.eng, err = pool.New(eps.clients[0], s.Stats, pool.Options{
		Endpoints:    eps.targets,
		Concurrency:  s.Concurrency,
		Limit:        r.startLimit(),
		Sampling:     r.job.Sampling,
		Context:      r.maxModelLen,
		Prompt:       r.job.Prompt,
		Stream:       s.Stream && s.Batch == nil,
		KeyedContext: s.Batch != nil,
		NPerRequest:  s.NPerRequest && s.Batch == nil,
		LongestFirst: s.LongestFirst,
		RetryErrors:  s.RetryErrors,
		UniqueIDs:    r.job.Selection.IDField == "", // row indices, or a row's own custom_id
		Log:          s.Log,
		Retry:        s.Retry,
		Rate:         s.Rate,
		Signals:      s.Auto,
		SyncInterval: s.SyncInterval,
		Price:        eps.price,
		// status.json as soon as what the directory holds is counted: when
		// the producer starts its first request, having passed the keys
		// done before it (a resume's records come first), so that a second
		// shell never reads "done 0" beside thousands of records on disk. A
		// heartbeat that cannot be written is not worth stopping for.
		OnIntake: func() { _ = r.Heartbeat(runstats.NewProgressRecord(r.setup.Stats.Snapshot(), nil)) },
		Reasoning: pool.ReasoningPolicy{
			Sample:  r.reasoningSample(),
			Require: s.RequireReasoning,
			OnFound: r.noReasoning,
			Server:  r.server,
		},
		SchemaRetries: s.SchemaRetries,
		Shape:         s.Shape,
		TokenIDs:      r.tokenIDsPolicy(),
	})
	if err != nil {
		return err
	}
	r.src = &badRowGuard{}
	opts.OnSkip = r.src.onSkip(opts.OnSkip)
	if r.src.Reader, err = dataset.Open(opts); err != nil {
		return &DatasetError{Err: err}
	}
	r.openStatus()
	every := s.MetricsInterval
	if every <= 0 {
		every = autoconc.DefaultInterval
	}
	for i, m := range s.Metrics {
		if len(s.Metrics) == len(eps.clients) {
			m.Scrape = observeLoad(m.Scrape, eps.clients[i], func() { r.eng.ServerSeen(i) })
		}
		m.Scrape = promscrape.NewShared(m.Scrape, every/2).Scrape
		r.metrics = append(r.metrics, m)
	}
	return nil
}
