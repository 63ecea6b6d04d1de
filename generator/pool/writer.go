package pool

// The writer: the one goroutine that owns the sink.

import (
	"context"
	"fmt"
	"time"

	"github.com/synthgen/synthgen/sink"
)

// write is the single owner of the sink: it writes results and flushes on a
// ticker so that a record counted as done is durable within SyncInterval
// even when no further result comes.
func (e *Engine) write(cancel context.CancelCauseFunc, out Output, results <-chan result) (err error) {
	var tick <-chan time.Time
	if e.opts.SyncInterval > 0 {
		t := time.NewTicker(e.opts.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	// What this writer counted as done and failed: when the sink fails,
	// the part of it no fsync made durable is taken back (see retract).
	var counted, countedErrs int
	refused := 0 // answers without the ids required, not written
	fail := func(err error, r result) error {
		cancel(err)
		e.retract(out, counted, countedErrs)
		// Nothing more is recorded: what was not written is asked again on
		// resume. Keep draining so that no slot blocks on the channel.
		if r.tr != nil {
			r.tr.Cancel()
		}
		for r := range results {
			if r.tr != nil {
				r.tr.Cancel()
			}
		}
		return err
	}
	for {
		select {
		case r, ok := <-results:
			if !ok {
				if err := out.Flush(); err != nil {
					return fail(fmt.Errorf("flush output: %w", err), result{})
				}
				e.found(e.reasoning.end())
				e.foundNoIDs(e.tokenIDs.end())
				if refused > 0 && e.fatal == nil {
					e.fatal = &RefusedTokenIDsError{Answers: refused}
				}
				return nil
			}
			switch {
			case r.rec != nil && e.refusedNoIDs(r.rec):
				// Not a done key: the resume asks it again, of a
				// server that sends the ids.
				e.foundNoIDs(e.tokenIDs.observe(r.rec))
				r.tr.Cancel()
				e.stats.AddCanceled()
				refused++
			case r.rec != nil:
				if err := out.Write(r.rec); err != nil {
					return fail(fmt.Errorf("write record %s/%d: %w", r.rec.ID, r.rec.Sample, err), r)
				}
				r.tr.Done(r.outcome)
				counted++
				e.found(e.reasoning.observe(r.rec))
				e.foundNoIDs(e.tokenIDs.observe(r.rec))
			case r.fail != nil:
				if err := out.WriteError(r.fail); err != nil {
					return fail(fmt.Errorf("write error record %s/%d: %w", r.fail.ID, r.fail.Sample, err), r)
				}
				r.tr.Fail(r.cause)
				countedErrs++
			case !r.unstarted:
				// The run stopped the key's request (a whole
				// conversation is one key, whatever its turn).
				e.stats.AddCanceled()
			}
			if r.pending {
				// After the sink took the record: the producer finds the
				// key in one place or the other at every moment.
				e.pending.remove(r.key)
			}
		case <-tick:
			if err := out.Flush(); err != nil {
				return fail(fmt.Errorf("flush output: %w", err), result{})
			}
		}
	}
}

// durableSink is a sink that knows how many of this run's records and
// error records are fsynced. *sink.Sink is one.
type durableSink interface {
	Durable() (records, errors int)
}

var _ durableSink = (*sink.Sink)(nil)

// retract takes out of the stats what the writer counted (counted records,
// countedErrs error records) but the sink, which has just failed, never
// made durable: lines written after the last successful fsync may be lost
// with the page cache (a full disk fails the fsync), so the summary counts
// only what this run surely kept, and a resume asks the rest again.
func (e *Engine) retract(out Output, counted, countedErrs int) {
	ds, ok := out.(durableSink)
	if !ok {
		return
	}
	recs, errs := ds.Durable()
	e.stats.Retract(int64(max(counted-recs, 0)), int64(max(countedErrs-errs, 0)))
}

// found acts on what the reasoning check found (nil: nothing): tells the
// runner, and with generation.require_reasoning stops intake and keeps the
// error for Run to return. The writer goroutine calls it.
func (e *Engine) found(err *NoReasoningError) {
	if err == nil {
		return
	}
	if e.opts.Reasoning.OnFound != nil {
		e.opts.Reasoning.OnFound(err)
	}
	if e.opts.Reasoning.Require {
		e.fatal = err
		e.Drain()
	}
}
