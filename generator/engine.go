// Package generator turns a job into answers. Its public face is small:
// Job (what is asked: a dataset.Selection, how a row becomes a prompt, how
// the model samples), Open and Runner (one run of a job into an output
// directory), Planner (a job counted against a directory, for inspect) and
// Stats (every figure a renderer shows). Inside: a bounded pool that keeps
// exactly the concurrency in flight against an OpenAI-compatible server,
// retries inside the slot (so the limit is also back-pressure), and hands
// every finished answer to a single writer goroutine that owns the sink;
// and the wire client over go-openai.
package generator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/sink"
)

// source yields prompts one at a time; io.EOF ends it. *dataset.Reader is one.
type source interface {
	Next() (dataset.Prompt, error)
}

// resultSink receives the engine's results. The engine calls Write, WriteError
// and Flush from one goroutine only, so implementations need no locking.
// *sink.resultSink is one.
type resultSink interface {
	// Recovered is what the directory held before the run; it must not
	// change while the run writes (the producer reads it meanwhile).
	Recovered() sink.Recovered
	Write(r *sink.Record) error
	WriteError(e *sink.ErrorRecord) error
	// Flush makes everything written so far durable.
	Flush() error
}

var (
	_ source     = (*dataset.Reader)(nil)
	_ resultSink = (*sink.Sink)(nil)
)

// completer sends one chat completion. *wireClient is one; tests may wrap it.
type completer interface {
	Complete(ctx context.Context, req wireRequest, onDelta func(n int)) (wireResponse, error)
}

var _ completer = (*wireClient)(nil)

// RetryPolicy bounds the retries of one request.
type RetryPolicy struct {
	MaxAttempts    int           // 1 = no retry
	InitialBackoff time.Duration // first wait, before jitter
	MaxBackoff     time.Duration // cap of the exponential wait
}

// engineOptions configure an engine.
type engineOptions struct {
	Concurrency int       // requests in flight
	Sampling    Sampling  // the job's: Model must be set (the runner resolves "first of /v1/models")
	Prompt      Prompting // the job's: how a row becomes the messages sent
	Stream      bool      // stream responses (tok/s from the first second)
	// RetryErrors asks again the keys that failed for good in an earlier
	// run; else they are passed over like done keys.
	RetryErrors bool
	// UniqueIDs says the source's ids are row indices, which cannot repeat,
	// unless a row names its own (a batch request's custom_id): the run then
	// keeps a set of those keys only, and a bit per other row (askedKeys).
	UniqueIDs bool
	Retry     RetryPolicy
	// SyncInterval is how often the writer flushes the sink when results
	// stop arriving; 0 means the sink syncs on every write itself.
	SyncInterval time.Duration
	// Now is the clock for record timestamps; nil = time.Now.
	Now func() time.Time
	// Log receives notes for a person (a row asking for another model);
	// nil: discarded.
	Log io.Writer
	// Reasoning checks the run's first answers for a server without a
	// reasoning parser (reasoning.go); zero: no check.
	Reasoning reasoningPolicy
	// OnIntake is called once, from the producer, when it starts its first
	// request or ends without one: the keys found done or failed on disk
	// before the first one still to ask are counted by then (all of them
	// when a resume's done keys come first, as they do). nil: nothing.
	OnIntake func()
}

// reasoningPolicy is what the engine does about a server without a
// reasoning parser.
type reasoningPolicy struct {
	Sample  int                     // first answers to read; 0: no check
	Require bool                    // fatal: drain, and Run returns the error
	OnFound func(*NoReasoningError) // told once, from the writer goroutine
}

// engine runs prompts through a completer into a resultSink.
type engine struct {
	client completer
	opts   engineOptions
	stats  *Stats

	drainOnce sync.Once
	drain     chan struct{}
	ran       atomic.Bool // an engine runs once: Drain and the stats belong to that run

	// The writer goroutine's: the check of the first answers, and what it
	// found when generation.require_reasoning makes that fatal (read by Run
	// once the writer has returned).
	reasoning *reasoningCheck
	fatal     error
}

// serverAnswered reports whether a call's outcome shows the server is
// there: an answer, or an HTTP status below 500, whatever the server thinks
// of the request (a gateway may route only the chat path, or want another
// key for GET /models). A 5xx is a proxy whose backend is away.
func serverAnswered(err error) bool {
	if err == nil {
		return true
	}
	ce := classify(err)
	return ce != nil && ce.Status != 0 && ce.Status < 500
}

// newOutage returns the gate for one Run, or nil when the client has no way
// to ask whether the server is up.
func (e *engine) newOutage(life context.Context) *outage {
	p, ok := e.client.(prober)
	if !ok {
		return nil
	}
	return &outage{
		life: life,
		probe: func(ctx context.Context) error {
			if _, err := p.Models(ctx); !serverAnswered(err) {
				return err
			}
			return nil
		},
		minBackoff: time.Second,
		maxBackoff: 30 * time.Second,
		now:        time.Now,
		onChange:   e.stats.SetServerDown,
	}
}

// newEngine returns an engine. stats receives every event; it may be shared with a
// reporter that renders it.
func newEngine(client completer, stats *Stats, opts engineOptions) (*engine, error) {
	if opts.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency must be at least 1, got %d", opts.Concurrency)
	}
	opts.Sampling.Samples = opts.Sampling.samples()
	if opts.Retry.MaxAttempts < 1 {
		opts.Retry.MaxAttempts = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if stats == nil {
		stats = NewStats(nil)
	}
	e := &engine{client: client, opts: opts, stats: stats, drain: make(chan struct{})}
	if opts.Reasoning.Sample > 0 {
		e.reasoning = &reasoningCheck{want: opts.Reasoning.Sample}
	}
	return e, nil
}

// Stats returns the engine's statistics.
func (e *engine) Stats() *Stats { return e.stats }

// Drain stops intake: no new request starts, the ones in flight go on until
// they finish or Run's context is cancelled. A key waiting between two
// attempts (a backoff, or the outage gate while the server is away) has
// nothing in flight: it stops at once, unwritten, and is asked again on
// resume. Safe to call more than once and from any goroutine (the first
// SIGINT calls it).
func (e *engine) Drain() { e.drainOnce.Do(func() { close(e.drain) }) }

// job is one key to request.
type job struct {
	prompt dataset.Prompt
	sample int
	msgs   []Message
}

// result is what a slot hands to the writer. The writer, not the slot,
// reports the outcome to the stats once the sink has taken the record, so
// a record counted as done in the progress line has been written (and is
// fsynced within SyncInterval), never merely received.
type result struct {
	rec     *sink.Record
	fail    *sink.ErrorRecord
	tr      *Tracker
	outcome Outcome // for rec
	cause   string  // for fail
}

// Summary counts what one Run did. It is a view of the run's Stats (the
// one ledger: the writer and the producer report there, and only there),
// taken when Run returns.
type Summary struct {
	Written int   // records written
	Failed  int   // error records written
	Skipped int64 // keys already done on disk
	// SkippedFailed are keys that failed for good in an earlier run and
	// were not asked again (no RetryErrors): not done.
	SkippedFailed int64
	Drained       bool // intake stopped (Drain, or ctx) before the source ended
	Canceled      int  // requests cut or not started because the run stopped (redone on resume)
	// Duplicates counts dataset rows whose key this run had already asked
	// (a repeated id): each key is asked once.
	Duplicates int
}

// Run requests every key of src that out does not skip, keeping exactly
// Concurrency requests in flight, and writes each answer or final failure to
// out from one goroutine. It returns when the source is exhausted (or Drain
// was called) and every request in flight has ended. Cancelling ctx cuts the
// requests in flight; what was written stays written. A failed request is a
// result (an error record), never an error of Run: Run fails only when the
// source or the sink does.
func (e *engine) Run(ctx context.Context, src source, out resultSink) (Summary, error) {
	if e.ran.Swap(true) {
		return Summary{}, errors.New("generator: an engine runs once (its Drain and Stats belong to that run); make a new one")
	}
	// A buffer as deep as the pool: a slot never waits for an fsync.
	results := make(chan result, e.opts.Concurrency)
	// A sink failure cancels every request (nothing could be recorded any
	// more); a source failure only stops intake.
	reqCtx, cancelReqs := context.WithCancelCause(ctx)
	defer cancelReqs(nil)
	gate := e.newOutage(reqCtx) // nil when the client cannot be probed
	// Waits between attempts end on Drain as well: a slot waiting there has
	// nothing in flight, and a drain starts nothing new.
	waitCtx, stopWaits := context.WithCancel(reqCtx)
	defer stopWaits()
	go func() {
		select {
		case <-e.drain:
			stopWaits()
		case <-waitCtx.Done():
		}
	}()

	// The sink belongs to the writer goroutine alone. Which keys to ask is
	// the producer's alone: what the sink recovered at open (which does not
	// change) and what this run has asked.
	writerErr := make(chan error, 1)
	go func() { writerErr <- e.write(cancelReqs, out, results) }()

	// The pool: SetLimit makes Go block while Concurrency requests are in
	// flight, so a slot is refilled the moment one frees. Slots never return
	// an error: a failed prompt is a result, not a reason to cancel siblings.
	var pool errgroup.Group
	pool.SetLimit(e.opts.Concurrency)
	intake := sync.OnceFunc(func() {
		if e.opts.OnIntake != nil {
			e.opts.OnIntake()
		}
	})
	ended, srcErr := e.produce(reqCtx, src, out.Recovered(), func(j job) {
		intake()
		pool.Go(func() error {
			if e.draining() || reqCtx.Err() != nil {
				results <- result{} // taken after intake stopped: not started
				return nil
			}
			r := e.do(reqCtx, waitCtx, gate, j)
			results <- r
			if r.tr != nil {
				// The answer is the writer's now: the slot is free, and in
				// flight counts slots, so its successor is not counted twice.
				r.tr.release()
			}
			return nil
		})
	})
	intake()
	_ = pool.Wait()
	close(results)
	err := <-writerErr
	sum := e.summary(!ended && srcErr == nil)
	if err != nil {
		return sum, err
	}
	if srcErr != nil {
		return sum, srcErr
	}
	return sum, e.fatal
}

// summary reads the run's figures from its stats.
func (e *engine) summary(drained bool) Summary {
	c := e.stats.counts()
	return Summary{
		Written:       int(c.done),
		Failed:        int(c.errors),
		Skipped:       c.alreadyDone - c.repeated,
		SkippedFailed: c.alreadyFailed,
		Drained:       drained,
		Canceled:      int(c.canceled),
		Duplicates:    int(c.repeated),
	}
}

func (e *engine) draining() bool {
	select {
	case <-e.drain:
		return true
	default:
		return false
	}
}

// produce hands jobs to start until the source ends (ended), Drain is
// called or ctx ends. start blocks while the pool is full. It alone decides
// whether a key is asked: not when the directory held it (done, or failed
// and errors are not retried), nor when this run asked it already (a
// repeated id in the dataset).
func (e *engine) produce(ctx context.Context, src source, held sink.Recovered, start func(job)) (ended bool, err error) {
	asked := askedKeys{all: !e.opts.UniqueIDs}
	notedModel := false
	for {
		if e.draining() || ctx.Err() != nil {
			return false, nil
		}
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read dataset: %w", err)
		}
		if p.Model != "" && p.Model != e.opts.Sampling.Model && !notedModel {
			notedModel = true
			fmt.Fprintf(e.opts.Log, "note: rows ask for model %q (first at %s); every request goes to %q, the one model the server serves (endpoint.model)\n",
				p.Model, p.Location, e.opts.Sampling.Model)
		}
		msgs := e.opts.Prompt.messages(p.Messages)
		byIndex := asked.byIndex(p)
		for s := range e.opts.Sampling.Samples {
			k := sink.Key{ID: p.ID, Sample: s}
			if asked.repeated(k, byIndex) {
				// Out of the run's total like a key found done: the key is
				// answered once, by the first copy.
				e.stats.AddRepeated(1)
				continue
			}
			if held.Done(k) {
				e.stats.AddAlreadyDone(1)
				continue
			}
			if !e.opts.RetryErrors && held.Failed(k) {
				e.stats.AddAlreadyFailed(1)
				continue
			}
			asked.add(k, byIndex)
			if e.draining() || ctx.Err() != nil {
				return false, nil
			}
			start(job{prompt: p, sample: s, msgs: msgs})
		}
		if byIndex {
			asked.addRow(p.Index)
		}
	}
}

// askedKeys are the keys a run asked (or found held), so that a key is
// written once although a repeated id may come after the first copy's record
// was written. Ids from an id column (all) are kept as keys. Without one, a
// row's id is its index, which no other row repeats, unless the row names its
// own (a batch request's custom_id): only those are kept as keys, and the
// rows whose id is their index as one bit each, in case a later row's
// custom_id spells an earlier row's index. A dataset of plain rows then costs
// a bit a row, not a key (ARCHITECTURE.md, "Measured decisions").
type askedKeys struct {
	all  bool
	keys map[sink.Key]struct{}
	rows []uint64 // bit i: row i, whose id is its index, was produced
	buf  []byte
}

// byIndex says whether p's id is its row index (never, with an id column).
func (a *askedKeys) byIndex(p dataset.Prompt) bool {
	if a.all {
		return false
	}
	a.buf = strconv.AppendInt(a.buf[:0], p.Index, 10)
	return string(a.buf) == p.ID
}

func (a *askedKeys) repeated(k sink.Key, byIndex bool) bool {
	if _, ok := a.keys[k]; ok {
		return true
	}
	if a.all || byIndex {
		return false
	}
	// A row's own id that spells a row index: asked when that row was.
	i, ok := rowIndex(k.ID)
	return ok && i/64 < uint64(len(a.rows)) && a.rows[i/64]&(1<<(i%64)) != 0
}

func (a *askedKeys) add(k sink.Key, byIndex bool) {
	if byIndex {
		return // addRow keeps the row
	}
	if a.keys == nil {
		a.keys = make(map[sink.Key]struct{})
	}
	a.keys[k] = struct{}{}
}

func (a *askedKeys) addRow(i int64) {
	w := int(i / 64)
	if w >= len(a.rows) {
		a.rows = append(a.rows, make([]uint64, w+1-len(a.rows))...)
	}
	a.rows[w] |= 1 << (i % 64)
}

// rowIndex reads id as a row index is written: decimal digits, no sign, no
// leading zero.
func rowIndex(id string) (uint64, bool) {
	if id == "" || len(id) > 19 || (id[0] == '0' && len(id) > 1) {
		return 0, false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}

// do runs one key to an answer or a final failure, retrying inside the slot.
// ctx bounds the requests; wait, which also ends on Drain, bounds the waits
// between them. A job that regenerates whole conversations asks the key's
// turns in sequence in this one slot (see conversation.go): the key is done
// when all its turns are, and a failure or a stop on any turn leaves it
// unwritten, to be asked whole again.
func (e *engine) do(ctx, wait context.Context, gate *outage, j job) result {
	tr := e.stats.Begin()
	start := time.Now()
	c := &conversation{last: j.msgs}
	if e.opts.Prompt.whole() && len(j.prompt.Conversation) > 0 {
		c = &conversation{full: e.opts.Prompt.messages(j.prompt.Conversation)}
	}
	for msgs := range c.requests() {
		resp, attempts, fail := e.ask(ctx, wait, gate, tr, j, msgs)
		if resp == nil {
			if fail == nil {
				tr.Cancel()
				return result{}
			}
			fail.Attempts += c.attempts
			return result{tr: tr, cause: fail.Cause, fail: fail}
		}
		c.answered(msgs, *resp, attempts)
		tr.TurnDone()
	}
	latency := time.Since(start)
	return result{rec: e.record(j, c, latency), tr: tr, outcome: c.outcome(latency)}
}

// ask sends one request of key j until it is answered (resp), fails for
// good (fail), or the run stops (neither: the key is asked on resume).
func (e *engine) ask(ctx, wait context.Context, gate *outage, tr *Tracker, j job, msgs []Message) (resp *wireResponse, attempts int, fail *sink.ErrorRecord) {
	req := wireRequest{Sampling: e.opts.Sampling, Messages: msgs, Params: j.prompt.Params, Stream: e.opts.Stream}
	// charged counts the attempts held against the prompt: not those that
	// failed because the whole server was away (see outage.go). Those are
	// bounded too, so a prompt that crashes the server every time it is
	// sent cannot keep the run busy forever.
	charged, excused := 0, 0
	for attempt := 1; ; attempt++ {
		if attempt > 1 && e.draining() {
			// A retry would be a new request: the key is asked on resume.
			return nil, 0, nil
		}
		epoch := gate.sent()
		r, err := e.client.Complete(ctx, req, tr.Delta)
		if serverAnswered(err) {
			gate.answered(epoch)
		}
		if err == nil {
			if next := e.opts.Sampling.moreRoom(req.MaxTokens, req.Params); r.FinishReason == "length" && next > 0 {
				// Cut at max_tokens, and the job asks for the whole
				// answer: again, with more room (a new request, so a
				// drain stops it like a retry).
				tr.Retry(causeLength)
				req.MaxTokens = next
				continue
			}
			return &r, attempt, nil
		}
		ce := classify(err)
		if ctx.Err() != nil || ce.Cause == causeCanceled {
			// Not a failure of the key: the run is stopping. Nothing is
			// written, so a resume asks again.
			return nil, 0, nil
		}
		charged++
		if ce.Cause == causeConnection && gate != nil && excused < e.opts.Retry.MaxAttempts {
			wasDown, werr := gate.check(wait)
			if werr != nil {
				return nil, 0, nil
			}
			if wasDown {
				charged--
				excused++
				tr.Retry(ce.Cause)
				continue // the server is back: try at once
			}
		}
		if !ce.Retryable || charged >= e.opts.Retry.MaxAttempts {
			return nil, attempt, &sink.ErrorRecord{
				ID:        j.prompt.ID,
				Sample:    j.sample,
				Status:    ce.Status,
				Message:   ce.Message,
				Attempts:  attempt,
				Cause:     ce.Cause,
				CreatedAt: e.opts.Now().UTC(),
			}
		}
		tr.Retry(ce.Cause)
		if !backoff.Sleep(wait, e.backoff(charged, ce.RetryAfter)) {
			return nil, 0, nil
		}
	}
}

// backoff is the wait after the attempt-th failure: exponential with full
// jitter (so 200 slots hit by one 503 do not come back in lockstep), at least
// what the server asked for in Retry-After.
func (e *engine) backoff(attempt int, retryAfter time.Duration) time.Duration {
	p := backoff.Policy{Initial: e.opts.Retry.InitialBackoff, Max: e.opts.Retry.MaxBackoff}
	return max(p.Delay(attempt), retryAfter)
}

func (e *engine) record(j job, c *conversation, latency time.Duration) *sink.Record {
	resp := c.final
	model := resp.Model
	if model == "" {
		model = e.opts.Sampling.Model
	}
	return &sink.Record{
		ID:               j.prompt.ID,
		Sample:           j.sample,
		Source:           j.prompt.Source,
		Messages:         c.last, // exactly what was sent (for the last turn)
		Reasoning:        resp.Reasoning,
		Content:          resp.Content,
		FinishReason:     resp.FinishReason,
		Model:            model,
		PromptTokens:     c.promptTokens,
		CompletionTokens: c.completionTokens,
		LatencyMS:        float64(latency.Microseconds()) / 1000,
		TTFTMS:           float64(c.ttft.Microseconds()) / 1000,
		Attempts:         c.attempts,
		CreatedAt:        e.opts.Now().UTC(),
		Turns:            c.turns,
	}
}

// write is the single owner of the sink: it writes results and flushes on a
// ticker so that a record counted as done is durable within SyncInterval
// even when no further result comes.
func (e *engine) write(cancel context.CancelCauseFunc, out resultSink, results <-chan result) (err error) {
	var tick <-chan time.Time
	if e.opts.SyncInterval > 0 {
		t := time.NewTicker(e.opts.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	// What this writer counted as done and failed: when the sink fails,
	// the part of it no fsync made durable is taken back (see retract).
	var counted, countedErrs int
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
				return nil
			}
			switch {
			case r.rec != nil:
				if err := out.Write(r.rec); err != nil {
					return fail(fmt.Errorf("write record %s/%d: %w", r.rec.ID, r.rec.Sample, err), r)
				}
				r.tr.Done(r.outcome)
				counted++
				e.found(e.reasoning.observe(r.rec))
			case r.fail != nil:
				if err := out.WriteError(r.fail); err != nil {
					return fail(fmt.Errorf("write error record %s/%d: %w", r.fail.ID, r.fail.Sample, err), r)
				}
				r.tr.Fail(r.cause)
				countedErrs++
			default:
				e.stats.addCanceled()
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
func (e *engine) retract(out resultSink, counted, countedErrs int) {
	ds, ok := out.(durableSink)
	if !ok {
		return
	}
	recs, errs := ds.Durable()
	e.stats.retract(int64(max(counted-recs, 0)), int64(max(countedErrs-errs, 0)))
}

// found acts on what the reasoning check found (nil: nothing): tells the
// runner, and with generation.require_reasoning stops intake and keeps the
// error for Run to return. The writer goroutine calls it.
func (e *engine) found(err *NoReasoningError) {
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
