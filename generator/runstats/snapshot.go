package runstats

// A Snapshot is the stats at one moment, with the rates, percentiles and
// ETA derived from them: what every renderer reads.

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"
)

// Snapshot is a copy of every figure at one moment. Rates exclude keys that
// were done before this run.
type Snapshot struct {
	At      time.Time
	Elapsed time.Duration // since the first request began; 0 before

	Total       int64 // requests this run will make
	AlreadyDone int64 // keys done on disk before this run
	// AlreadyFailed are keys that failed for good before this run and that
	// it does not ask again (no --retry-errors): part of the job, not done.
	AlreadyFailed int64
	Done          int64 // completed in this run
	Errors        int64 // gave up in this run
	InFlight      int64 // requests holding a slot of the pool: at most the concurrency
	Retries       int64 // attempts retried (a request retried twice counts 2)
	// ServerDownSince is when the server stopped answering (every slot
	// waits for it to come back); zero while it answers.
	ServerDownSince time.Time
	// LastOutageSince is when the latest outage began, whether it is over
	// or not; zero when the server never went away. Figures the server
	// gave before it (its /metrics) describe a server that is gone.
	LastOutageSince time.Time

	// Batches are the batch mode's batches as last told (SetBatches);
	// shared, not to be changed.
	Batches []BatchRecord

	ErrorsByCause  map[string]int64
	RetriesByCause map[string]int64
	RetryLast      map[string]string // the last retried error's message, by cause
	// MaxModelLen is the model's context as the server listed it (vLLM's
	// max_model_len); 0 when it did not say.
	MaxModelLen int64
	// Awaiting is the streams in flight that have had no byte yet, not
	// even headers: held in a server's queue (llama-server sends nothing
	// until a slot frees), or stranded in one (wire's stranded.go).
	Awaiting int64

	// BadRows are dataset rows skipped as bad so far: their keys are out
	// of Total and Planned.
	BadRows int64

	CompletionTokens int64 // credited so far: completed (corrected) plus the running attempts' deltas
	RunningTokens    int64 // the part of CompletionTokens that belongs to requests in flight
	PromptTokens     int64

	// Cumulative rates over Elapsed.
	ReqPerSec       float64
	TokPerSec       float64
	PromptTokPerSec float64

	// Recent rates over the last shortWindow and longWindow whole seconds
	// (the second in progress is left out); while Elapsed is shorter than
	// the window they equal the cumulative rates.
	Last10s Throughput
	Last60s Throughput

	// Completion length of completed requests, in tokens; percentiles are
	// nearest-rank.
	CompletionAvg float64
	CompletionP50 int64
	CompletionP90 int64
	CompletionMax int64

	// Streaming latencies of completed requests. ITL is per request:
	// (latency - TTFT) / (deltas - 1), so under speculative decoding it is
	// the time between chunks, not tokens.
	TTFTP50, TTFTP90 time.Duration
	ITLP50, ITLP90   time.Duration

	Truncated      int64   // finish_reason "length"
	TruncatedShare float64 // Truncated / Done

	// ExpectedCompletion is the estimated mean completion length (tokens):
	// the Kaplan-Meier (product-limit) mean, each running request counting
	// as right-censored at its current deltas. Early in a run the short
	// answers have finished and the long ones are still streaming, so the
	// mean of the completed alone is biased low; the censored estimate is
	// never below it nor below the mean over completed and running taken
	// at face value. ExpectedCompletionSE is its standard error (the KM
	// standard deviation over sqrt(completed)); NaN with no completions.
	ExpectedCompletion   float64
	ExpectedCompletionSE float64

	// RemainingTokens is the estimated completion tokens still to come:
	// ExpectedCompletion for each request not started, and for each one in
	// flight the mean residual length at its current tokens (what the
	// answers longer than that had beyond it; never less than
	// ExpectedCompletion - current, 0 only past the longest answer).
	RemainingTokens float64

	// ETA is RemainingTokens over Last60s.TokPerSec, and never less than
	// the time the slowest request in flight needs for its residual length
	// at its own streaming rate (etaOf). ETAKnown is false when
	// there is no rate or no length yet. ETAError is the ± that the standard
	// error of ExpectedCompletion implies for the requests not yet done;
	// 0 when it is unknown. Confidence grades the estimate by completed
	// count: "low" (< 30), "medium" (< 300), "high".
	ETA        time.Duration
	ETAKnown   bool
	ETAError   time.Duration
	Confidence string
	// ETAUnknown says why the ETA is not known when a rate would give one:
	// "outage" while the server is down (every endpoint away: the rate
	// falls while nothing moves, and an ETA from it would only grow);
	// "batch" in the batch mode (answers come a whole batch at a time, when
	// the provider finishes it, within its completion window). Empty
	// otherwise.
	ETAUnknown string

	// Priced says the run has a price (endpoint.price); without one Cost
	// and CostProjected are 0 and no renderer shows them. Cost is what
	// this run's answers cost so far, in USD. CostProjected adds what the
	// requests still to come will cost (0 before the first answer: nothing
	// to project from): each the mean answer's prompt cost, and the
	// completion tokens still to come (RemainingTokens, and those the
	// requests in flight streamed) at the output price. So it has the
	// ETA's care for the long answers that finish last; the mean cost of
	// the answers done would undercount them early in a run.
	Priced        bool
	Cost          float64
	CostProjected float64
	// Billed is what every answer the server sent this run cost, the kept
	// ones (Cost) and those thrown away (retried, refused, of a key that
	// failed): what the provider bills, as far as usage says.
	Billed float64

	// Endpoints are each endpoint's figures, in base_url order: one per
	// replica (stats_endpoint.go); empty when no run named them.
	Endpoints []EndpointSnapshot

	// notStarted is the keys no request has begun for (etaOf), flight
	// those begun and not ended, and flightTurns the turns these have had
	// answered; perKey the requests a completed key took on average (1
	// before any): for paceOf, which counts requests, not keys.
	notStarted, flight, flightTurns int64
	perKey                          float64
	// byRate is the ETA of the remaining tokens at the last minute's
	// rate, and its error bar (etaOf).
	byRate, byRateErr float64
}

// EndpointsUp counts the endpoints whose gate is open.
func (s Snapshot) EndpointsUp() int {
	n := 0
	for _, e := range s.Endpoints {
		if e.State == EndpointUp {
			n++
		}
	}
	return n
}

// Completed is the number of keys done, including those done before this run.
func (s Snapshot) Completed() int64 { return s.AlreadyDone + s.Done }

// Planned is the number of keys of the whole job, including those done
// before this run and those that failed before it and are not asked again.
func (s Snapshot) Planned() int64 { return s.AlreadyDone + s.AlreadyFailed + s.Total }

// Snapshot returns every figure at now().
func (s *Stats) Snapshot() Snapshot {
	snap, eps := s.figures()
	// Each endpoint's state is asked with no lock of the Stats held: a
	// gate's state takes its outage's and its router's locks, which are
	// held while they tell the Stats of an outage (SetServerDown), so
	// asking under s.mu could deadlock with a slot finding a server down.
	if len(eps) > 0 {
		snap.Endpoints = make([]EndpointSnapshot, len(eps))
		for i, es := range eps {
			snap.Endpoints[i] = es.snapshot(snap.Elapsed)
		}
	}
	paceOf(&snap)
	return snap
}

// figures is the snapshot but for its endpoints, taken under s.mu, and the
// endpoints' ledgers.
func (s *Stats) figures() (Snapshot, []*Endpoint) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stoppedAt.IsZero() {
		now = s.stoppedAt
	}

	snap := Snapshot{
		At:              now,
		Total:           s.total.Load(),
		AlreadyDone:     s.alreadyDone.Load(),
		AlreadyFailed:   s.alreadyFailed.Load(),
		BadRows:         s.badRows.Load(),
		Done:            s.done,
		Errors:          s.errors,
		InFlight:        s.slots.Load(),
		Retries:         s.retries,
		ServerDownSince: s.downSince,
		LastOutageSince: s.lastDown,
		ErrorsByCause:   copyCounts(s.errCause),
		RetriesByCause:  copyCounts(s.retryCause),
		RetryLast:       maps.Clone(s.retryLast),
		Batches:         s.batches,
		MaxModelLen:     s.maxModelLen.Load(),
		Awaiting:        s.awaiting.Load(),
		PromptTokens:    s.promptTok,
		Truncated:       s.truncated,
		Confidence:      confidence(s.done),
	}
	var since time.Duration
	if s.started {
		since = now.Sub(s.start)
	}
	flight := make([]inFlight, 0, len(s.inFlight))
	for r := range s.inFlight {
		f := inFlight{tokens: r.streamed(), rate: r.ownRate(since)}
		flight = append(flight, f)
		snap.flightTurns += r.turns.Load()
		snap.RunningTokens += f.tokens
	}
	slices.SortFunc(flight, func(a, b inFlight) int { return cmp.Compare(a.tokens, b.tokens) })
	s.heldLocked(&snap)
	running := make([]int64, len(flight))
	for i, f := range flight {
		running[i] = f.tokens
	}
	snap.CompletionTokens = s.compTokens + snap.RunningTokens

	if s.started {
		snap.Elapsed = max(now.Sub(s.start), 0)
	}
	if secs := snap.Elapsed.Seconds(); secs > 0 {
		snap.ReqPerSec = float64(s.done) / secs
		snap.TokPerSec = float64(snap.CompletionTokens) / secs
		snap.PromptTokPerSec = float64(s.promptTok) / secs
	}
	snap.Last10s = s.windowLocked(snap, shortWindow)
	snap.Last60s = s.windowLocked(snap, longWindow)

	s.distributionsLocked(&snap)
	mean, sd, residual := s.lengths.kaplanMeier(running, s.done)
	snap.ExpectedCompletion = mean
	snap.ExpectedCompletionSE = math.NaN()
	if s.done > 0 {
		snap.ExpectedCompletionSE = sd / math.Sqrt(float64(s.done))
	}
	etaOf(&snap, flight, residual)
	if p := s.price.Load(); p != nil {
		snap.Priced, snap.Cost, snap.Billed = true, s.cost, max(s.billed, s.cost)
		if s.done > 0 {
			snap.CostProjected = projectCost(&snap, *p, s.cost, s.compTokens, s.done)
		}
	}
	return snap, s.endpoints
}

// distributionsLocked fills snap's answer lengths, time to first token and
// inter-token latency: means and quantiles. Called with mu.
func (s *Stats) distributionsLocked(snap *Snapshot) {
	snap.perKey = 1
	if s.done > 0 {
		snap.perKey = float64(s.turnsDone) / float64(s.done)
		snap.CompletionAvg = float64(s.compTokens) / float64(s.done)
		snap.TruncatedShare = float64(s.truncated) / float64(s.done)
	}
	snap.CompletionP50 = s.lengths.quantile(0.5)
	snap.CompletionP90 = s.lengths.quantile(0.9)
	snap.CompletionMax = s.lengths.max
	snap.TTFTP50 = time.Duration(s.ttft.quantile(0.5)) * time.Microsecond
	snap.TTFTP90 = time.Duration(s.ttft.quantile(0.9)) * time.Microsecond
	snap.ITLP50 = time.Duration(s.itl.quantile(0.5)) * time.Microsecond
	snap.ITLP90 = time.Duration(s.itl.quantile(0.9)) * time.Microsecond
}

// heldLocked counts what the directory held at open (Stats.SeedHeld)
// that the producer has not passed yet: out of Total, into AlreadyDone
// and AlreadyFailed. (A repeated row is a bad row, in neither.)
func (s *Stats) heldLocked(snap *Snapshot) {
	if d := s.heldDone.Load() - snap.AlreadyDone; d > 0 {
		snap.AlreadyDone += d
		snap.Total -= d
	}
	if d := s.heldFailed.Load() - snap.AlreadyFailed; d > 0 {
		snap.AlreadyFailed += d
		snap.Total -= d
	}
	snap.Total = max(snap.Total, 0)
}

// windowLocked sums the buckets of the last w whole seconds; before w has
// elapsed it returns the cumulative rates.
func (s *Stats) windowLocked(snap Snapshot, w time.Duration) Throughput {
	if snap.Elapsed < w {
		return Throughput{Span: snap.Elapsed, ReqPerSec: snap.ReqPerSec, TokPerSec: max(snap.TokPerSec, 0), PromptTokPerSec: snap.PromptTokPerSec}
	}
	cur := int64(snap.Elapsed / time.Second)
	n := int64(w / time.Second)
	var tok, reqs, prompt int64
	for sec := cur - n; sec < cur; sec++ {
		v := s.deltas[sec&ringMask].Load()
		if v>>countBits == uint64(sec)&epochMask {
			tok += int64(v & countMask)
		}
		if b := &s.corr[sec&ringMask]; b.sec == sec {
			tok += b.tokens
			reqs += b.reqs
			prompt += b.prompt
		}
	}
	secs := w.Seconds()
	// A burst of retries can take back more tokens than a window credited:
	// a rate is never shown negative.
	return Throughput{Span: w, ReqPerSec: float64(reqs) / secs, TokPerSec: max(float64(tok)/secs, 0), PromptTokPerSec: float64(prompt) / secs}
}

func copyCounts(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sampleSet keeps the values of one per-request figure with bounded memory:
// all of them up to maxSamples, then a uniform reservoir (algorithm R).
// It is sorted lazily, in place, when a quantile is asked for.
type sampleSet struct {
	vals   []int64
	n      int64 // values seen
	max    int64
	sorted bool
	seed   uint64 // splitmix64 state: deterministic, no global rand
}

func (ss *sampleSet) add(v int64) {
	ss.n++
	if ss.n == 1 || v > ss.max {
		ss.max = v
	}
	if len(ss.vals) < maxSamples {
		ss.vals = append(ss.vals, v)
		ss.sorted = false
		return
	}
	if j := ss.next() % uint64(ss.n); j < maxSamples {
		ss.vals[j] = v
		ss.sorted = false
	}
}

func (ss *sampleSet) next() uint64 {
	ss.seed += 0x9e3779b97f4a7c15
	z := ss.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (ss *sampleSet) sort() {
	if !ss.sorted {
		slices.Sort(ss.vals)
		ss.sorted = true
	}
}

// quantile returns the nearest-rank q-quantile (the smallest value with at
// least q of the samples at or below it); 0 when empty.
func (ss *sampleSet) quantile(q float64) int64 {
	if len(ss.vals) == 0 {
		return 0
	}
	ss.sort()
	rank := int(math.Ceil(q * float64(len(ss.vals))))
	return ss.vals[min(max(rank, 1), len(ss.vals))-1]
}

// kaplanMeier returns the restricted mean and standard deviation of the
// product-limit estimate built from the completed lengths (events; each
// stored sample weighs completed/len(samples) once the set is a reservoir)
// and the running requests' current tokens (right-censored, sorted), and
// for each running request its mean residual length: the integral of the
// curve S from its tokens c to tau over S(c), what the answers longer than
// c had beyond c on average (0 at tau). At equal values events come before
// censorings, as usual. The mean is restricted to the longest observation:
// when that one is still running it is a lower bound, which is the honest
// answer early in a run.
func (ss *sampleSet) kaplanMeier(censored []int64, completed int64) (mean, sd float64, residual []float64) {
	ss.sort()
	ev := ss.vals
	residual = make([]float64, len(censored))
	if len(ev) == 0 && len(censored) == 0 {
		return 0, 0, residual
	}
	// sAt is S at each censored value; residual holds the integral of S
	// up to it until the total is known.
	sAt := make([]float64, len(censored))
	w := 1.0
	if len(ev) > 0 {
		w = float64(completed) / float64(len(ev))
	}
	atRisk := w*float64(len(ev)) + float64(len(censored))
	surv, prev := 1.0, 0.0
	var m1, m2 float64
	i, j := 0, 0
	for i < len(ev) || j < len(censored) {
		var t int64
		switch {
		case j == len(censored):
			t = ev[i]
		case i == len(ev):
			t = censored[j]
		default:
			t = min(ev[i], censored[j])
		}
		var d, c float64
		for i < len(ev) && ev[i] == t {
			d += w
			i++
		}
		if d > 0 {
			x := float64(t)
			m1 += surv * (x - prev)
			m2 += surv * (x*x - prev*prev)
			prev = x
			surv *= 1 - d/atRisk
		}
		for j < len(censored) && censored[j] == t {
			residual[j] = m1 + surv*(float64(t)-prev)
			sAt[j] = surv
			c++
			j++
		}
		atRisk -= d + c
	}
	var tau int64
	if len(ev) > 0 {
		tau = ev[len(ev)-1]
	}
	if len(censored) > 0 {
		tau = max(tau, censored[len(censored)-1])
	}
	x := float64(tau)
	m1 += surv * (x - prev)
	m2 += surv * (x*x - prev*prev)
	for j := range residual {
		if sAt[j] > 0 {
			residual[j] = max(m1-residual[j], 0) / sAt[j]
		} else {
			residual[j] = 0
		}
	}
	return m1, math.Sqrt(max(m2-m1*m1, 0)), residual
}

// Paced is the requests waiting for their share of their endpoints' rate
// limits now, and the limit that binds most of them ("requests" or
// "tokens"; "" when none waits).
func (s Snapshot) Paced() (n int64, by string) {
	var most int64
	for _, e := range s.Endpoints {
		n += e.Paced
		if e.Paced > most {
			most, by = e.Paced, e.PacedBy
		}
	}
	return n, by
}

// projectCost is the run's cost at its end (Snapshot.CostProjected), from
// cost, what the done answers cost, their completion tokens and count.
func projectCost(snap *Snapshot, p Price, cost float64, compTokens, done int64) float64 {
	toCome := float64(max(snap.Total-snap.Done-snap.Errors, 0))
	// The prompts' share of the done answers' cost, cached tokens priced
	// as they were; an answer without usage costs nothing, hence the floor.
	promptCost := max(cost-float64(compTokens)*p.Output/1e6, 0) / float64(done)
	tokens := snap.RemainingTokens + float64(snap.RunningTokens)
	if math.IsNaN(tokens) || math.IsInf(tokens, 0) {
		// No length to expect: the mean answer's cost for each.
		return cost + cost/float64(done)*toCome
	}
	return cost + toCome*promptCost + tokens*p.Output/1e6
}

// SetBatches makes b the batch mode's batches every snapshot holds from
// now on; b is not changed after.
func (s *Stats) SetBatches(b []BatchRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = b
}

// BatchStates counts the batches by state, in the order states first
// appear, for a person: "2 in_progress (1,234/3,000 answered), 1 collected".
func (s Snapshot) BatchStates() []BatchState {
	var out []BatchState
	for _, b := range s.Batches {
		state := b.State
		if b.State == "submitted" && b.Status != "" {
			state = b.Status // the server's word while it has the batch
		}
		i := slices.IndexFunc(out, func(c BatchState) bool { return c.State == state })
		if i < 0 {
			out = append(out, BatchState{State: state})
			i = len(out) - 1
		}
		out[i].Batches++
		out[i].Requests += b.Requests
		out[i].Completed += b.Completed + b.Failed
	}
	return out
}

// BatchState is the batches in one state: how many, their requests, and
// those of them the server has answered or failed.
type BatchState struct {
	State     string
	Batches   int
	Requests  int
	Completed int
}
