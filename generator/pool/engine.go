// Package pool keeps a run's requests in flight: a producer reads the
// source and passes over what the directory holds, a bounded set of
// workers (exactly the limit in flight, which concurrency: auto moves)
// each asks one key, retrying inside its slot so that the limit is also
// back-pressure, a router sends each request to the least loaded healthy
// endpoint behind its outage gate, and one writer goroutine owns the sink.
// Every event is counted in a runstats.Stats.
package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// Source yields prompts one at a time; io.EOF ends it. *dataset.Reader is one.
type Source interface {
	Next() (dataset.Prompt, error)
}

// Output receives the Engine's results. The Engine calls Write, WriteError
// and Flush from one goroutine only, so implementations need no locking.
// *sink.Sink is one.
type Output interface {
	// Recovered is what the directory held before the run; it must not
	// change while the run writes (the producer reads it meanwhile).
	Recovered() sink.Recovered
	Write(r *sink.Record) error
	WriteError(e *sink.ErrorRecord) error
	// Flush makes everything written so far durable.
	Flush() error
}

var (
	_ Source = (*dataset.Reader)(nil)
	_ Output = (*sink.Sink)(nil)
)

// Completer sends one chat completion. *wireClient is one; tests may wrap it.
type Completer interface {
	Complete(ctx context.Context, req wire.Request, onDelta func(n int)) (wire.Response, error)
}

var _ Completer = (*wire.Client)(nil)

// RetryPolicy bounds the retries of one request.
type RetryPolicy struct {
	MaxAttempts    int           // 1 = no retry
	InitialBackoff time.Duration // first wait, before jitter
	MaxBackoff     time.Duration // cap of the exponential wait
}

// Options configure an Engine.
type Options struct {
	// Concurrency is the most requests in flight: the pool's workers. With
	// a fixed concurrency it is exactly the number in flight.
	Concurrency int
	// Limit is how many of them may be in flight at first (SetLimit moves
	// it, within 1..Concurrency); 0: Concurrency.
	Limit    int
	Sampling job.Sampling // the job's: Model must be set (the runner resolves "first of /v1/models")
	// Context is the model's context in tokens as the server listed it
	// (vLLM's max_model_len, llama.cpp's n_ctx); 0: unknown. on_length:
	// retry never asks for more than it leaves after the prompt.
	Context int
	Prompt  job.Prompting // the job's: how a row becomes the messages sent
	Stream  bool          // stream responses (tok/s from the first second)
	// RetryErrors asks again the keys that failed for good in an earlier
	// run; else they are passed over like done keys.
	RetryErrors bool
	// UniqueIDs says the Source's ids are row indices, which cannot repeat,
	// unless a row names its own (a batch request's custom_id): the run then
	// keeps a set of those keys only, and a bit per other row (askedKeys).
	UniqueIDs bool
	Retry     RetryPolicy
	// Rate is each endpoint's rate limits where its server states none
	// (package pace); the zero value: none.
	Rate RateLimits
	// Signals: Engine.Signals is read (concurrency: auto steers by the
	// answers): every endpoint counts them. Without it only a paced
	// endpoint does, and a request pays no lock for pacing.
	Signals bool
	// SyncInterval is how often the writer flushes the sink when results
	// stop arriving; 0 means the sink syncs on every write itself.
	SyncInterval time.Duration
	// Price is what the server bills for the job's model (endpoint.price):
	// each record's cost, and the run's; nil: none.
	Price *runstats.Price
	// Now is the clock for record timestamps; nil = time.Now.
	Now func() time.Time
	// Log receives notes for a person (a row asking for another model);
	// nil: discarded.
	Log io.Writer
	// Reasoning checks the run's first answers for a server without a
	// reasoning parser (reasoning.go); zero: no check.
	Reasoning ReasoningPolicy
	// TokenIDs checks the run's first answers for a server that ignores
	// return_token_ids (tokenids.go); zero: no check.
	TokenIDs TokenIDsPolicy
	// Endpoints are the replicas the requests go to (router.go), each
	// with its own client; empty: the Engine's one client.
	Endpoints []Endpoint
	// SchemaRetries is how many times an answer whose content is not in
	// the shape Sampling.ResponseFormat asks is asked again before it is
	// recorded as a failure (cause "schema"; shape.go).
	SchemaRetries int
	// Shape is Sampling.ResponseFormat compiled (shape.Compile), when the
	// caller has it: a large schema takes long to compile, and is compiled
	// once. Nil: New compiles it.
	Shape *shape.Validator
	// OnIntake is called once, from the producer, when it starts its first
	// request or ends without one: the keys found done or failed on disk
	// before the first one still to ask are counted by then (all of them
	// when a resume's done keys come first, as they do). nil: nothing.
	OnIntake func()
	// KeyedContext puts each key in its requests' context (KeyOf): the
	// batch Completer names its lines by key.
	KeyedContext bool
	// NPerRequest asks the samples of a prompt still to do in one request
	// carrying n (choices.go), until a server is found to ignore n; false:
	// one request per sample.
	NPerRequest bool
	// LongestFirst holds rows with a length hint in a window of 2 x
	// Concurrency and starts the longest first (produce.go, window);
	// false: dataset order.
	LongestFirst bool
}

// ReasoningPolicy is what the Engine does about a server without a
// reasoning parser.
type ReasoningPolicy struct {
	Sample  int                     // first answers to read; 0: no check
	Require bool                    // fatal: drain, and Run returns the error
	OnFound func(*NoReasoningError) // told once, from the writer goroutine
	// Server is the kind of server asked (from /v1/models), for the
	// error's hint; KindUnknown or "": a hint for each kind.
	Server promscrape.Kind
}

// Engine runs prompts through a Completer into an Output.
type Engine struct {
	client Completer
	opts   Options
	stats  *runstats.Stats

	lim       *limiter // keys in flight at once: Limit, moved by SetLimit
	drainOnce sync.Once
	drain     chan struct{}
	ran       atomic.Bool // an engine runs once: Drain and the stats belong to that run

	// The writer goroutine's: the check of the first answers, and what it
	// found when generation.require_reasoning makes that fatal (read by Run
	// once the writer has returned).
	reasoning *reasoningCheck
	tokenIDs  *tokenIDsCheck
	fatal     error

	// shape checks every answer's content against the job's response
	// format (shape.go); nil when the job asks for none.
	shape *shape.Validator

	// pending: the keys in flight, when the sink says what it wrote
	// (pending.go); the producer adds, the writer removes.
	pending pendingKeys

	// route is the running Run's router (nil before it): ServerSeen
	// reaches its gates.
	route atomic.Pointer[router]

	// probeMin, when set (tests), replaces the outage gates' probe
	// interval (1 s doubling to 30 s).
	probeMin time.Duration

	// nIgnored: a server answered one choice to a request for several
	// (choices.go); from then on each sample is its own request.
	nIgnored atomic.Bool
}

// serverAnswered reports whether a call's outcome shows the server is
// there: an answer, or an HTTP status below 500, whatever the server thinks
// of the request (a gateway may route only the chat path, or want another
// key for GET /models). A 5xx is a proxy whose backend is away.
func serverAnswered(err error) bool {
	if err == nil {
		return true
	}
	ce := wire.Classify(err)
	return ce != nil && ce.Status != 0 && ce.Status < 500
}

// New returns an Engine. stats receives every event; it may be shared with a
// reporter that renders it.
func New(client Completer, stats *runstats.Stats, opts Options) (*Engine, error) {
	if opts.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency must be at least 1, got %d", opts.Concurrency)
	}
	opts.Sampling.Samples = opts.Sampling.Count()
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
		stats = runstats.NewStats(nil)
	}
	if opts.Limit < 1 || opts.Limit > opts.Concurrency {
		opts.Limit = opts.Concurrency
	}
	e := &Engine{client: client, opts: opts, stats: stats, drain: make(chan struct{}), lim: newLimiter(opts.Limit)}
	var err error
	if e.shape = opts.Shape; e.shape == nil {
		if e.shape, err = shape.Compile(opts.Sampling.ResponseFormat); err != nil {
			return nil, fmt.Errorf("generation.response_format: %w", err)
		}
	}
	if opts.Reasoning.Sample > 0 {
		e.reasoning = &reasoningCheck{want: opts.Reasoning.Sample, server: opts.Reasoning.Server}
	}
	if opts.TokenIDs.Sample > 0 {
		e.tokenIDs = &tokenIDsCheck{want: opts.TokenIDs.Sample, server: opts.TokenIDs.Server}
	}
	return e, nil
}

// SetLimit sets how many requests may be in flight, clamped to
// 1..Concurrency, and returns the limit in force: more start at once when
// it grows; when it shrinks, the ones in flight finish and no new one
// starts until fewer than the limit are. Safe from any goroutine.
func (e *Engine) SetLimit(n int) int {
	n = min(max(n, 1), e.opts.Concurrency)
	e.lim.set(n)
	return n
}

// Limit is how many requests may be in flight now.
func (e *Engine) Limit() int { return e.lim.get() }

// Stats returns the Engine's statistics.
func (e *Engine) Stats() *runstats.Stats { return e.stats }

// Drain stops intake: no new request starts, the ones in flight go on until
// they finish or Run's context is cancelled. A key waiting between two
// attempts (a backoff, or the outage gate while the server is away) has
// nothing in flight: it stops at once, unwritten, and is asked again on
// resume. Safe to call more than once and from any goroutine (the first
// SIGINT calls it).
func (e *Engine) Drain() { e.drainOnce.Do(func() { close(e.drain) }) }

// job is one key to request.
type task struct {
	prompt dataset.Prompt
	sample int
	msgs   []chat.Message
	// pending: the key is in Engine.pending until the writer takes its
	// result (pending.go).
	pending bool
	// more are the prompt's other samples asked in the same request, as
	// its choices 1.. (choices.go); nil: the one sample.
	more []moreSample
}

func (j task) key() sink.Key { return sink.Key{ID: j.prompt.ID, Sample: j.sample} }

// result is what a slot hands to the writer. The writer, not the slot,
// reports the outcome to the stats once the sink has taken the record, so
// a record counted as done in the progress line has been written (and is
// fsynced within SyncInterval), never merely received.
type result struct {
	rec     *sink.Record
	fail    *sink.ErrorRecord
	tr      *runstats.Tracker
	outcome runstats.Outcome // for rec
	cause   string           // for fail
	// pending: key leaves Engine.pending once the writer took this result.
	pending bool
	key     sink.Key
	// unstarted: a key handed to a worker after intake stopped (the
	// producer was waiting for a slot when the drain came), never begun:
	// neither rec nor fail, and not canceled either. A result with none of
	// rec, fail and unstarted is a key whose request the run cut.
	unstarted bool
}

// Run requests every key of src that out does not skip, keeping the limit
// in flight (exactly Concurrency when it is fixed), and writes each answer or final failure to
// out from one goroutine. It returns when the Source is exhausted (or Drain
// was called) and every request in flight has ended. Cancelling ctx cuts the
// requests in flight; what was written stays written. A failed request is a
// result (an error record), never an error of Run: Run fails only when the
// Source or the sink does.
func (e *Engine) Run(ctx context.Context, src Source, out Output) (runstats.Summary, error) {
	if e.ran.Swap(true) {
		return runstats.Summary{}, errors.New("generator: an engine runs once (its Drain and Stats belong to that run); make a new one")
	}
	// A buffer as deep as the pool: a slot never waits for an fsync.
	results := make(chan result, e.opts.Concurrency)
	// A sink failure cancels every request (nothing could be recorded any
	// more); a Source failure only stops intake.
	reqCtx, cancelReqs := context.WithCancelCause(ctx)
	defer cancelReqs(nil)
	gate := e.newRouter(reqCtx) // every endpoint with its own outage gate
	e.route.Store(gate)
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
	// change) and what this run has asked (what the sink says it wrote,
	// under its key lock, and the keys in flight: pending.go).
	writerErr := make(chan error, 1)
	go func() { writerErr <- e.write(cancelReqs, out, results) }()

	// The pool (workers.go): Concurrency long-lived workers, of which the
	// limiter lets the current limit (Concurrency when it is fixed) hold a
	// key at once, so a slot is refilled the moment one frees. Slots never
	// fail: a failed prompt is a result, not a reason to stop the others.
	intake := sync.OnceFunc(func() {
		if e.opts.OnIntake != nil {
			e.opts.OnIntake()
		}
	})
	workers := startPool(e.opts.Concurrency, e.lim, func(j task) {
		if e.draining() || reqCtx.Err() != nil {
			for _, s := range j.samples() {
				results <- result{pending: s.pending, key: j.keyOf(s.sample), unstarted: true} // taken after intake stopped
			}
			return
		}
		if j.more != nil {
			e.doChoices(reqCtx, waitCtx, gate, j, results)
			return
		}
		r := e.do(reqCtx, waitCtx, gate, j)
		r.pending, r.key = j.pending, j.key()
		results <- r
		if r.tr != nil {
			// The answer is the writer's now: the slot is free, and in
			// flight counts slots, so its successor is not counted twice.
			r.tr.Release()
		}
	})
	ended, srcErr := e.produce(reqCtx, src, out, func(j task) {
		intake()
		workers.submit(j)
	})
	if ended {
		e.stats.SettleHeld() // every row passed: the producer's counts are exact
	}
	intake()
	workers.wait()
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
func (e *Engine) summary(drained bool) runstats.Summary { return e.stats.Summary(drained) }

// ServerSeen tells the engine that endpoint i (in Options.Endpoints
// order) answered its /metrics: when its gate is closed, its prober asks
// it now rather than at its next wait. Safe from any goroutine; before or
// after a Run it does nothing.
func (e *Engine) ServerSeen(i int) {
	if r := e.route.Load(); r != nil && i >= 0 && i < len(r.eps) {
		r.eps[i].gate.nudge()
	}
}

func (e *Engine) draining() bool {
	select {
	case <-e.drain:
		return true
	default:
		return false
	}
}
