package runstats

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	// ringSize per-second buckets cover the 60 s window plus the second in
	// progress; a power of two keeps the index a mask.
	ringSize = 128
	ringMask = ringSize - 1

	// A delta bucket packs the second it belongs to (epochBits) and the
	// deltas counted in it (countBits) into one word, so a bucket rolls over
	// to a new second with a single compare-and-swap and no lock.
	countBits = 36 // 68 billion deltas in one second
	epochBits = 64 - countBits
	epochMask = 1<<epochBits - 1 // seconds since the first request: 8.5 years
	countMask = 1<<countBits - 1

	// maxSamples bounds the memory of each percentile set: exact up to this
	// many samples (a 25,000-prompt job stays exact), a uniform reservoir
	// sample beyond it.
	maxSamples = 1 << 17
)

// Window lengths of the recent rates in Snapshot.
const (
	shortWindow = 10 * time.Second
	longWindow  = 60 * time.Second
)

// Stats is the engine's throughput ledger for one run. Every event lands
// here (a request enters a slot, a streamed delta arrives, an attempt is
// retried, a request completes or gives up) and Snapshot turns the ledger
// into the figures a person watches: rates, lengths, latencies and an ETA.
//
// Tokens are counted as they arrive, because req/s misleads during a ramp:
// 200 long answers start together and none finishes for minutes, yet the
// server is producing thousands of tokens a second. Each streamed delta is
// credited at once; when a request completes, its count is corrected to
// usage.completion_tokens (streamed chunks are not tokens under speculative
// decoding, usage is the truth where the server sends it). A retried or
// failed attempt takes its tokens back: they produced no record.
//
// The hot path is Tracker.Delta: one atomic add on the request and one
// compare-and-swap on the current second's bucket, no mutex.
//
// All methods are safe for concurrent use. The zero value is not usable:
// call NewStats.
type Stats struct {
	now func() time.Time

	total       atomic.Int64
	maxModelLen atomic.Int64 // the model's context as /v1/models gave it; 0: unknown
	awaiting    atomic.Int64 // streams in flight that have had no byte, not even headers
	alreadyDone atomic.Int64 // keys done before this run
	// alreadyFailed are keys that failed for good before this run and are
	// not asked again (no --retry-errors): out of Total, and not done.
	alreadyFailed atomic.Int64
	// heldDone and heldFailed are what the output directory held at open
	// (SeedHeld): a snapshot counts at least them until the producer has
	// passed every row (SettleHeld).
	heldDone, heldFailed atomic.Int64
	// badRows are dataset rows that could not be asked (dataset.on_bad_row:
	// skip), a repeated id among them; their keys are out of Total.
	badRows  atomic.Int64
	repeated atomic.Int64 // the bad rows that repeat an earlier row's id
	// canceled are keys whose request the run abandoned when it stopped:
	// begun in a slot, cut or not retried. A key never handed to a slot is
	// none, so canceled never exceeds what was in flight.
	canceled atomic.Int64
	// price is endpoint.price (SetPrice); nil: snapshots carry no cost.
	price atomic.Pointer[Price]
	// lost are records and error records counted, then taken back because
	// the sink failed before an fsync made them durable (Retract).
	lost atomic.Int64
	// slots counts the requests holding a slot of the pool: Begin to
	// release. A request whose answer waits for the writer has left its
	// slot (its successor may be running) but not yet inFlight, where its
	// tokens stay until the writer corrects them.
	slots atomic.Int64

	// deltas is the lock-free per-second ring of streamed deltas (the hot
	// path); everything else below is owned by mu.
	deltas [ringSize]atomic.Uint64

	mu         sync.Mutex
	started    bool
	start      time.Time
	corr       [ringSize]corrBucket
	inFlight   map[*Tracker]struct{}
	done       int64
	errors     int64
	retries    int64
	errCause   map[string]int64
	retryCause map[string]int64
	retryLast  map[string]string // the last retried error's message, by cause
	batches    []BatchRecord     // the batch mode's batches (SetBatches)
	compTokens int64             // final completion tokens of completed requests
	promptTok  int64
	cost       float64 // USD of completed requests at endpoint.price
	billed     float64 // USD of every answer the server sent, kept or not (Tracker.Billed)
	truncated  int64
	turnsDone  int64     // requests the completed keys took (a turn each; 1 without TurnDone)
	lengths    sampleSet // completion tokens per completed request
	ttft       sampleSet // microseconds
	itl        sampleSet // microseconds
	downSince  time.Time // zero while the server is reachable
	lastDown   time.Time // when the latest outage began, over or not; zero before the first
	stoppedAt  time.Time // set by Stop: the clock of every later snapshot
	// endpoints are the per-endpoint ledgers (stats_endpoint.go), one per
	// base_url; each has its own lock.
	endpoints []*Endpoint
}

// Stop freezes the ledger's clock: a snapshot taken after the run ended
// (the final line, the summary, report.json) reports rates over the run,
// not over the run plus however long the sink took to close.
func (s *Stats) Stop() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stoppedAt.IsZero() {
		s.stoppedAt = now
	}
}

// SetServerDown records that the server stopped answering at since (down)
// or is back (!down). The engine calls it from its outage gate.
func (s *Stats) SetServerDown(down bool, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if down {
		s.downSince = since
		s.lastDown = since
	} else {
		s.downSince = time.Time{}
	}
}

// corrBucket holds what is credited at the end of requests in one second:
// token corrections (usage minus deltas, or minus a retried attempt's
// deltas), completed requests and prompt tokens.
type corrBucket struct {
	sec    int64 // -1: never used
	tokens int64
	reqs   int64
	prompt int64
}

// NewStats returns an empty ledger. now is the clock (injectable for tests);
// nil means time.Now. Rates are measured from the first Begin, so the time a
// run spends opening its dataset and recovering its output directory does
// not dilute them.
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	s := &Stats{
		now:        now,
		inFlight:   make(map[*Tracker]struct{}),
		errCause:   make(map[string]int64),
		retryCause: make(map[string]int64),
		retryLast:  make(map[string]string),
	}
	for i := range s.corr {
		s.corr[i].sec = -1
	}
	s.lengths.seed = 0x9e3779b97f4a7c15
	s.ttft.seed = 0xbf58476d1ce4e5b9
	s.itl.seed = 0x94d049bb133111eb
	return s
}

// SetTotal records how many keys the run's selection holds, done or not.
// The engine learns which are already done as it reaches them (the sink
// knows keys, not the dataset's order), and moves them out of Total with
// AddAlreadyDone.
func (s *Stats) SetTotal(n int64) { s.total.Store(n) }

// AddAwaiting counts a stream that starts (+1) or stops (-1) waiting for
// its first byte: what a server holds in its queue without a word
// (wire.Options.OnAwait).
func (s *Stats) AddAwaiting(d int) { s.awaiting.Add(int64(d)) }

// SetMaxModelLen records the model's context (vLLM's max_model_len), so
// that the summary can say what prompts of cause too_long did not fit.
func (s *Stats) SetMaxModelLen(n int) { s.maxModelLen.Store(int64(n)) }

// SetPrice says what the run's answers cost (endpoint.price): its
// snapshots carry the cost so far and projected; without one they carry
// none.
func (s *Stats) SetPrice(p Price) { s.price.Store(&p) }

// AddAlreadyDone records keys found done on disk before this run (resume):
// they leave Total (the requests this run makes) for AlreadyDone, so
// done/planned stays right, and count towards no rate.
func (s *Stats) AddAlreadyDone(n int64) {
	s.alreadyDone.Add(n)
	s.total.Add(-n)
}

// AddAlreadyFailed records keys that failed for good in an earlier run and
// that this run does not ask again (no --retry-errors): like keys found
// done, they leave Total (the requests this run makes), but they are not
// done, and every figure keeps them apart.
func (s *Stats) AddAlreadyFailed(n int64) {
	s.alreadyFailed.Add(n)
	s.total.Add(-n)
}

// SeedHeld records what the output directory held when it was opened:
// done keys, and failed keys this run does not ask again (0 with
// --retry-errors), each at most the selection's keys. The producer counts
// every such key as it passes it (AddAlreadyDone, AddAlreadyFailed), and
// it passes the ones after the first key it asks only as the pool lets it
// read on: so that the first status.json of a resume carries what is on
// disk, a snapshot counts the larger of each seed and what the producer
// counted, never both, until SettleHeld.
func (s *Stats) SeedHeld(done, failed int64) {
	s.heldDone.Store(max(done, 0))
	s.heldFailed.Store(max(failed, 0))
}

// SettleHeld drops the seeds once the producer has read every row: its
// counts are then exact (a record outside the selection, under a lowered
// dataset.limit, was in the seed but is no key of the job).
func (s *Stats) SettleHeld() {
	s.heldDone.Store(0)
	s.heldFailed.Store(0)
}

// AddBadRows records rows dataset rows skipped as bad (dataset.on_bad_row:
// skip), holding keys keys (rows x generation.n): they leave Total, the
// requests this run makes, and are neither done nor failed.
func (s *Stats) AddBadRows(rows, keys int64) {
	s.badRows.Add(rows)
	s.total.Add(-keys)
}

// AddRepeated records that n of the bad rows (AddBadRows counts them)
// repeat the id of an earlier row, so that a summary can say why.
func (s *Stats) AddRepeated(n int64) { s.repeated.Add(n) }

// AddCanceled records a key whose request the run abandoned when it
// stopped (begun in a slot, cut or not retried): it is asked again on
// resume. A key the run never handed to a slot is not one.
func (s *Stats) AddCanceled() { s.canceled.Add(1) }

// Retract takes back records and errors error records counted as done and
// failed that the sink lost when it failed (written, never fsynced): they
// count as lost, asked again on resume; their requests were answered, so
// they are not canceled. Their tokens stay in the rates, which measure the
// server, not the disk.
func (s *Stats) Retract(records, errors int64) {
	if records == 0 && errors == 0 {
		return
	}
	s.mu.Lock()
	s.done -= records
	s.errors -= errors
	s.mu.Unlock()
	s.lost.Add(records + errors)
}

// Summary is what the run did so far, read from its ledger; drained says
// whether intake stopped before the source ended.
func (s *Stats) Summary(drained bool) Summary {
	s.mu.Lock()
	done, errors := s.done, s.errors
	s.mu.Unlock()
	return Summary{
		Written:       int(done),
		Failed:        int(errors),
		Skipped:       s.alreadyDone.Load(),
		SkippedFailed: s.alreadyFailed.Load(),
		BadRows:       s.badRows.Load(),
		Drained:       drained,
		Canceled:      int(s.canceled.Load()),
		Lost:          int(s.lost.Load()),
		Duplicates:    int(s.repeated.Load()),
	}
}

// Tracker follows one request (one key) through its slot, retries
// included. Delta and Retry are called from the slot's goroutine; Done and
// Fail from the engine's writer once the sink has taken the result, so the
// request stays in flight until then. Cancel may come from either; the first
// of Done, Fail and Cancel ends the request and the later ones are no-ops.
type Tracker struct {
	s     *Stats
	start time.Time                // the ledger's time origin, copied so Delta takes no lock
	cur   atomic.Int64             // deltas of the attempt under way
	ep    atomic.Pointer[Endpoint] // where the attempt under way was sent; nil: not said
	kept  atomic.Int64             // deltas of the turns already answered (a whole conversation)
	turns atomic.Int64             // turns answered (TurnDone): the requests the key took so far
	// firstAt is when the request's first delta came (nanoseconds after
	// start, +1 so that 0 means none yet) and firstN how many it carried:
	// the request's own rate is what it streamed since (ownRate).
	firstAt atomic.Int64
	firstN  atomic.Int64
	ended   atomic.Bool
	held    atomic.Bool // holds a slot of the pool (see Stats.slots)
}

// Release says the request left its slot (it handed its result to the
// writer): in flight -1. Done, Fail and Cancel release too; only the first
// call counts.
func (r *Tracker) Release() {
	if r.held.Swap(false) {
		r.s.slots.Add(-1)
	}
}

// Origin is when the request began, on the run's clock.
func (r *Tracker) Origin() time.Time { return r.start }

// streamed is every delta the request credited: its answered turns' and
// the current attempt's.
func (r *Tracker) streamed() int64 { return r.kept.Load() + r.cur.Load() }

// TurnDone records that one turn of a whole conversation was answered: its
// deltas stay credited when a later turn's attempt is retried (they are
// taken back only if the key fails or is cancelled, leaving no record).
func (r *Tracker) TurnDone() {
	r.kept.Add(r.cur.Swap(0))
	r.turns.Add(1)
}

// Billed counts what one answer the server sent cost at endpoint.price,
// whatever becomes of it: an answer asked again (cut at max_tokens, not
// in the job's shape, from another model) or one of a conversation that
// fails later was billed all the same, and Snapshot.Billed says so beside
// the kept answers' Cost.
func (r *Tracker) Billed(usd float64) {
	r.s.mu.Lock()
	r.s.billed += usd
	r.s.mu.Unlock()
}

// Begin records that one request entered a slot (in flight +1).
func (s *Stats) Begin() *Tracker {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.start = s.now()
	}
	r := &Tracker{s: s, start: s.start}
	r.held.Store(true)
	s.slots.Add(1)
	s.inFlight[r] = struct{}{}
	return r
}

// SendingTo says where the request's next attempt goes: its deltas are
// counted to that endpoint's Streamed too.
func (r *Tracker) SendingTo(es *Endpoint) { r.ep.Store(es) }

// Delta credits n streamed text deltas to the request, to the current
// second and to the endpoint of the attempt (SendingTo). It is the hot
// path: atomics only.
func (r *Tracker) Delta(n int) {
	if n <= 0 || r.ended.Load() {
		return
	}
	r.cur.Add(int64(n))
	if es := r.ep.Load(); es != nil {
		es.streamed.Add(int64(n))
	}
	since := max(r.s.now().Sub(r.start), 0)
	if r.firstAt.Load() == 0 && r.firstAt.CompareAndSwap(0, int64(since)+1) {
		r.firstN.Store(int64(n))
	}
	r.s.addDeltas(int64(since/time.Second), uint64(n))
}

// ownRate is the request's own streaming rate at since (after the ledger's
// origin): the deltas after its first one over the time since that one
// came, in deltas a second; 0 while it cannot tell (fewer than two deltas,
// no time passed).
func (r *Tracker) ownRate(since time.Duration) float64 {
	at := r.firstAt.Load()
	if at == 0 {
		return 0
	}
	d := since - time.Duration(at-1)
	n := r.streamed() - r.firstN.Load()
	if d <= 0 || n <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func (s *Stats) addDeltas(sec int64, n uint64) {
	b := &s.deltas[sec&ringMask]
	ep := uint64(sec) & epochMask
	for {
		old := b.Load()
		var next uint64
		if old>>countBits == ep {
			next = old + n
		} else {
			// The bucket still holds a second that left the ring: start over.
			next = ep<<countBits | n&countMask
		}
		if b.CompareAndSwap(old, next) {
			return
		}
	}
}

// Retry records that the current attempt failed and will be retried. cause
// is a short class such as "http_429", "timeout" or "stream_cut". The
// attempt's deltas stop counting: a retried answer starts from zero.
func (r *Tracker) Retry(cause string) { r.RetryBecause(cause, "") }

// RetryBecause is Retry with the error's message, which the figures keep,
// the last one of each cause, so that "retries connection 76" can say what
// the connections did.
func (r *Tracker) RetryBecause(cause, why string) {
	if r.ended.Load() {
		return
	}
	lost := r.cur.Swap(0)
	if r.kept.Load() == 0 {
		// The next attempt streams from its own first delta.
		r.firstAt.Store(0)
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries++
	s.retryCause[cause]++
	if why != "" {
		s.retryLast[cause] = why
	}
	s.bucketLocked(s.now()).tokens -= lost
}

// Outcome is what the engine knows about a completed request.
type Outcome struct {
	PromptTokens     int
	CompletionTokens int
	UsageKnown       bool // the server sent usage; PromptTokens and CompletionTokens are its figures
	Deltas           int  // streamed deltas of the successful attempts, every turn's (0 when not streaming)
	FinishReason     string
	Latency          time.Duration // whole request
	TTFT             time.Duration // time to first delta of the successful attempt; 0 when not streaming
	Attempts         int           // 1 + retries, over every turn; ITL is taken from single-attempt, single-turn requests only
	// Cost is the answer's in USD at endpoint.price (Price.Cost); 0
	// without one.
	Cost float64
}

// Done records a completed request (in flight -1) and corrects its token
// count: to o.CompletionTokens when usage is known, else to o.Deltas, else
// to the deltas counted.
func (r *Tracker) Done(o Outcome) {
	if r.ended.Swap(true) {
		return
	}
	r.Release()
	counted := r.streamed()
	final := counted
	switch {
	case o.UsageKnown:
		final = int64(o.CompletionTokens)
	case o.Deltas > 0:
		final = int64(o.Deltas)
	}
	deltas := int64(o.Deltas)
	if deltas == 0 {
		deltas = counted
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, r)
	b := s.bucketLocked(s.now())
	b.tokens += final - counted
	b.reqs++
	b.prompt += int64(o.PromptTokens)
	s.done++
	s.turnsDone += max(r.turns.Load(), 1)
	s.compTokens += final
	s.promptTok += int64(o.PromptTokens)
	s.cost += o.Cost
	if o.FinishReason == "length" {
		s.truncated++
	}
	s.lengths.add(final)
	if o.TTFT > 0 {
		s.ttft.add(o.TTFT.Microseconds())
		// Inter-token latency per request: the decode time spread over the
		// gaps between deltas. Each request weighs the same in the
		// percentiles, however long its answer. A retried request is left
		// out: its latency may span earlier attempts and their backoff.
		if deltas >= 2 && o.Latency > o.TTFT && o.Attempts <= 1 {
			s.itl.add((o.Latency - o.TTFT).Microseconds() / (deltas - 1))
		}
	}
}

// Cancel ends a request cut by the run stopping (in flight -1, no error):
// nothing is recorded and a resume asks again. Its deltas stop counting.
func (r *Tracker) Cancel() { r.end("") }

// Fail records a request that gave up (in flight -1, errors +1). Its
// deltas stop counting: a failure leaves no record.
func (r *Tracker) Fail(cause string) { r.end(cause) }

// end takes a request that left no record out of flight; a non-empty cause
// counts it as an error.
func (r *Tracker) end(cause string) {
	if r.ended.Swap(true) {
		return
	}
	r.Release()
	lost := r.cur.Swap(0) + r.kept.Swap(0)
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, r)
	if cause != "" {
		s.errors++
		s.errCause[cause]++
	}
	s.bucketLocked(s.now()).tokens -= lost
}

// bucketLocked returns the correction bucket of the second t falls in,
// recycling it if it still holds an older second.
func (s *Stats) bucketLocked(t time.Time) *corrBucket {
	sec := int64(t.Sub(s.start) / time.Second)
	if sec < 0 {
		sec = 0
	}
	b := &s.corr[sec&ringMask]
	if b.sec != sec {
		*b = corrBucket{sec: sec}
	}
	return b
}

// Throughput is the run's rates over one window (promscrape.Rates are the
// server's own).
type Throughput struct {
	Span            time.Duration // the window actually covered: shorter than asked early in a run
	ReqPerSec       float64       // completed requests per second
	TokPerSec       float64       // completion tokens per second, as credited (see Stats)
	PromptTokPerSec float64       // prompt tokens per second (usage, at completion)
}

// Now is the clock the figures are taken on (NewStats's).
func (s *Stats) Now() time.Time { return s.now() }
