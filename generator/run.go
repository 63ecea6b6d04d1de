package generator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/internal/redact"
)

// Outcome is how a run ended, in the word the manifest records for
// inspect's history and the run's summary line starts with: "done" only
// when every selected key is answered, so that 'grep ^done' never reads an
// interrupted or incomplete run as finished.
type Outcome string

// The outcomes of a run.
const (
	OutcomeDone        Outcome = "done"        // every selected key is answered
	OutcomeIncomplete  Outcome = "incomplete"  // the run ended, some keys failed for good
	OutcomeInterrupted Outcome = "interrupted" // a signal stopped it before the end
	OutcomeFailed      Outcome = "failed"      // it could not go on (Err, CloseErr)
)

// Result is how one Run ended.
type Result struct {
	Outcome Outcome
	Summary runstats.Summary
	// Err is why the run could not go on: the pool's (a bad row with
	// dataset.on_bad_row fail, a disk that filled, *pool.NoReasoningError,
	// *pool.NoTokenIDsError) or concurrency: auto's refusal
	// (*autoconc.RefusedError); nil else.
	Err error
	// CloseErr is the output's close error; the parts it left are
	// recovered by the next run.
	CloseErr error
	// Interrupted: a signal stopped intake or cut requests (a signal that
	// came once every key was taken cut nothing: the run is done).
	Interrupted bool
	OnDisk      int // records in the directory
	Failed      int // keys that failed for good and that no record superseded
}

// Hooks are what the caller adds to a Run; each may be nil.
type Hooks struct {
	// Progress renders the run (and hands Heartbeat its records) while
	// the pool runs; its context ends when the pool is done, and Run waits
	// for it to return before it writes the final files.
	Progress func(ctx context.Context)
	// Interrupted reports whether a signal stopped the run.
	Interrupted func() bool
	// Verdict is the error the run ends with (nil: done), what Run
	// returns; ExitCode is that error's exit code, for report.json. Nil:
	// Result.Err or CloseErr, and exit codes 0 and 1.
	Verdict  func(Result) error
	ExitCode func(error) int
	// Final is the last progress record (with the server's view), for the
	// final status.json and report.json; nil: the Stats' own.
	Final func() runstats.ProgressRecord
}

// Run runs the job to its end, in this order: concurrency: auto's loop
// (refusing the run before its first request when the servers' metrics
// cannot steer it), Progress beside the pool, the pool until the source
// ends or Drain; then the outcome into the manifest and the output
// closed, and the final status.json and report.json. The first signal is
// the caller's to turn into Drain. It is called once, and the Runner is
// done with after it.
func (r *Runner) Run(ctx context.Context, h Hooks) (Result, error) {
	h = h.withDefaults()
	stopAuto, err := r.startAuto(ctx)
	if err != nil {
		res := Result{Outcome: OutcomeFailed, Err: err}
		return r.end(res, h, func() {})
	}
	progressCtx, stopProgress := context.WithCancel(context.WithoutCancel(ctx))
	var progress sync.WaitGroup
	progress.Go(func() { h.Progress(progressCtx) })

	// The set of what this run writes is sized once for the keys left
	// (string ids: a reserved region, resident only as it fills) rather
	// than grown as it fills.
	if left := r.keysLeft(); left > 0 {
		r.out.ReserveKeys(int(min(left, math.MaxInt32)))
	}
	runCtx, batchErr := r.batchStops(ctx)
	sum, runErr := r.eng.Run(runCtx, r.src, r.out)
	if err := batchErr(); err != nil && runErr == nil {
		runErr = err
	}
	r.setup.Stats.Stop()
	stopAuto()

	res := Result{Summary: sum, Err: runErr, OnDisk: r.OnDisk(), Failed: r.FailedOpen(),
		Interrupted: h.Interrupted() && (sum.Drained || sum.Canceled > 0)}
	res.Outcome = res.outcome()
	return r.end(res, h, func() { stopProgress(); progress.Wait() })
}

// end closes the output with res's outcome, marks the batches collected,
// stops the progress (whose last line then shows the batches as the
// ledger leaves them, not downloaded after the log said collected), then
// writes the final files with the verdict.
func (r *Runner) end(res Result, h Hooks, stopProgress func()) (Result, error) {
	// The manifest records the outcome known before the close; a close
	// that fails writes no manifest, so it cannot change what is recorded.
	res.CloseErr = r.closeOutput(res.Outcome)
	if res.CloseErr != nil {
		res.Outcome = OutcomeFailed
	}
	if err := r.closeBatch(res); err != nil {
		fmt.Fprintf(r.setup.Log, "warning: %s: %v\n", batch.LedgerName, err)
	}
	stopProgress()
	err := h.Verdict(res)
	o := runfiles.RunOutcome{ExitCode: h.ExitCode(err), State: res.Outcome.state(), Err: err, Summary: res.Summary, EndedAt: time.Now()}
	if ferr := r.status.Finish(h.Final(), o); ferr != nil {
		fmt.Fprintf(r.setup.Log, "warning: %v\n", ferr)
	}
	return res, err
}

// outcome is how the run went, before the output is closed.
func (res Result) outcome() Outcome {
	switch {
	case res.Err != nil:
		return OutcomeFailed
	case res.Interrupted:
		return OutcomeInterrupted
	case res.Failed > 0:
		return OutcomeIncomplete
	}
	return OutcomeDone
}

// state is the final state status.json gives an outcome.
func (o Outcome) state() runfiles.State {
	switch o {
	case OutcomeDone, OutcomeIncomplete:
		return runfiles.StateDone
	case OutcomeInterrupted:
		return runfiles.StateInterrupted
	}
	return runfiles.StateFailed
}

func (h Hooks) withDefaults() Hooks {
	if h.Progress == nil {
		h.Progress = func(context.Context) {}
	}
	if h.Interrupted == nil {
		h.Interrupted = func() bool { return false }
	}
	if h.Verdict == nil {
		h.Verdict = func(res Result) error { return errors.Join(res.Err, res.CloseErr) }
	}
	if h.ExitCode == nil {
		h.ExitCode = func(err error) int {
			if err != nil {
				return 1
			}
			return 0
		}
	}
	return h
}

// ServerSources are the endpoints' /metrics, in base_url order, as every
// reader of the run shares them (concurrency: auto's loop, the caller's
// progress): a scrape younger than half the fastest reader's interval is
// handed to the next reader instead of asking the server again. Nil when
// there are none.
func (r *Runner) ServerSources() []func(context.Context) (promscrape.Sample, error) {
	out := make([]func(context.Context) (promscrape.Sample, error), len(r.metrics))
	for i, m := range r.metrics {
		out[i] = m.Scrape
	}
	return out
}

// startAuto starts concurrency: auto's loop over Setup.Metrics once their
// first scrape shows they can steer the limit; the returned func stops it
// and waits. Under a fixed concurrency it does nothing.
func (r *Runner) startAuto(ctx context.Context) (stop func(), err error) {
	if r.auto == nil {
		return func() {}, nil
	}
	s := r.setup
	metrics := r.metrics
	if len(metrics) == 0 {
		// No /metrics URL: every endpoint is steered by its answers.
		for _, u := range s.baseURLs() {
			metrics = append(metrics, autoconc.Endpoint{URL: redact.URL(u)})
		}
	}
	stats := s.Stats
	loop, err := autoconc.Prepare(ctx, metrics, autoconc.LoopOptions{
		Ceiling: s.Concurrency,
		Every:   s.AutoInterval,
		Target:  r,
		// Throughput is the client's own count at each endpoint: every
		// streamed delta as it arrives, or, when the run does not stream,
		// each answer's tokens at its end (TokensAtEnd).
		Client: func() autoconc.ClientView {
			snap, said := stats.Snapshot(), r.eng.Signals()
			v := autoconc.ClientView{InFlight: int(snap.InFlight), Endpoints: make([]autoconc.EndpointView, len(snap.Endpoints))}
			for i, ep := range snap.Endpoints {
				tokens := ep.StreamedTokens
				if !s.Stream {
					tokens = ep.CompletionTokens
				}
				v.Endpoints[i] = autoconc.EndpointView{InFlight: int(ep.InFlight), Tokens: tokens, Answers: ep.Completed}
				if i < len(said) {
					g := said[i]
					v.Endpoints[i].Replies = autoconc.Replies{Ended: g.Ended, Limited: g.Limited, Waited: g.Waited, Busy: g.Busy,
						RequestsPerMinute: g.RequestsPerMinute, TokensPerMinute: g.TokensPerMinute, Cost: g.Cost}
				}
			}
			return v
		},
		TokensAtEnd:      !s.Stream,
		Now:              stats.Now,
		SetEndpointLimit: stats.SetEndpointLimit,
		Log:              s.AutoLog,
		Warn:             s.Log,
		OnWarning:        r.status.AddWarning,
	})
	if err != nil {
		return nil, err
	}
	r.auto.Steer(loop.Steering())
	loopCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { loop.Run(loopCtx) })
	return func() { cancel(); wg.Wait() }, nil
}
