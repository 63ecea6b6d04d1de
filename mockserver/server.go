// Package mockserver is a vLLM-like OpenAI-compatible server for running and
// testing synthgen offline: /v1/models, /v1/chat/completions (plain and
// streamed, with reasoning and content in vLLM's exact shapes), and a
// Prometheus /metrics with vLLM's metric names (or, as Options.Flavor says,
// SGLang's or llama.cpp's, with their /v1/models: flavor.go). Answers are made of word
// pieces from a small vocabulary; their lengths are long-tailed and a pure
// function of the seed and the prompt, so retries and resumes see the same
// answer. It serves a bounded number of requests at once and queues the rest,
// like vLLM's continuous batching, so load tests see realistic back-pressure.
//
// Besides vLLM's behaviour it can act as other servers do at the connection
// level (conn.go): hold a queued stream's headers until it runs
// (Options.HeadersWhenRunning, as llama.cpp), close a share of kept-alive
// connections after an answer (Options.RateCloseAfter), and stop listening
// while holding its queued requests silent (Server.Abandon), as a server
// process that is being replaced does.
package mockserver

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synthgen/synthgen/mockserver/batchapi"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// ReasoningField values: where the reasoning text goes in messages and deltas.
const (
	FieldReasoning        = "reasoning"         // vLLM >= 0.11
	FieldReasoningContent = "reasoning_content" // older vLLM, SGLang
	FieldBoth             = "both"              // both fields, same text
	FieldNone             = "none"              // no reasoning parser: the whole answer is content, the thought in <think> tags
)

// Options configures a Server. The zero value is usable: see the defaults.
type Options struct {
	Model          string        // default "mock-model"
	ReasoningField string        // FieldReasoning (default), FieldReasoningContent, FieldBoth or FieldNone
	TokenDelay     time.Duration // per generated token; 0 = as fast as possible
	TTFT           time.Duration // time to first token, counted from when the request starts running
	MeanTokens     int           // mean completion length (reasoning+content) in tokens, default 300; lognormal, capped by max_tokens
	MaxRunning     int           // requests served at once; the rest wait in a FIFO queue; 0 = unlimited
	// KVBudget and BatchScale turn the batch model on (batch.go); both 0:
	// off, and requests are paced and queued exactly as without them.
	// KVBudget is the KV cache in tokens: a running request holds its
	// prompt and the tokens generated so far; past the budget the newest
	// running request is preempted and redoes its work. 0: no budget.
	KVBudget int
	// BatchScale makes every token take TokenDelay * (1 + running/BatchScale):
	// a bigger batch steps slower. 0: the delay does not depend on the batch.
	BatchScale int
	// CountTokensAtEnd adds an answer's tokens to the generation counter
	// (vllm:generation_tokens_total, Stats.GenerationTokens) only when the
	// answer is finished, and leaves that series out of /metrics until the
	// first one is, as llm-d-inference-sim does. Else tokens count as they
	// are produced, as vLLM's do.
	CountTokensAtEnd bool
	Seed             int64 // an answer is a pure function of (Seed, request messages)
	// MaxModelLen is the model's context, as vLLM's --max-model-len: a
	// request whose prompt tokens plus max_tokens exceed it is answered
	// with vLLM's 400, and /v1/models reports it. 0: no check, and
	// /v1/models reports 131072. The llama.cpp flavour is llama-server's
	// -c instead (flavor.go: refuseTooLong, fitContext).
	MaxModelLen int
	// StallRate is the share of requests that stall on purpose: a stream
	// sends StallAfter tokens, then holds the connection open without a
	// byte until the client goes away; a plain request never answers. Which
	// requests stall is a pure function of Seed and the request's arrival
	// number, so a run with one request in flight sees the same stalls.
	StallRate  float64
	StallAfter int // tokens a stalling stream sends first

	// Fault rates: the share of requests (0 to 1, adding up to at most 1)
	// that fail on purpose in each way (see the Fault kinds). Which request
	// gets which fault is a pure function of Seed and its arrival number,
	// like StallRate (an independent draw: a stall comes first).
	Rate429      float64
	RetryAfter   time.Duration // the Retry-After a 429 carries, in (fractional) seconds
	Rate500      float64
	Rate503      float64
	RateReset    float64
	RateResetMid float64
	RateBadChunk float64
	RateCut      float64
	RateGarbage  float64
	RateLength   float64
	// Restarts, done by Serve only: after every RestartEvery requests
	// (0: never) and once RestartAt after Serve starts (0: never), the
	// server closes its listener and every connection, and listens again
	// RestartFor later.
	RestartEvery int
	RestartAt    time.Duration
	RestartFor   time.Duration

	// HeadersWhenRunning holds a stream's status line and headers back
	// until the request starts running, as llama.cpp does: a request
	// waiting in the queue (MaxRunning or the batch model) gets no byte.
	// false: vLLM's way, the headers go out as soon as the request is
	// accepted. A plain answer's headers always come with its body.
	HeadersWhenRunning bool
	// RateCloseAfter is the share of complete answers (0 to 1) after which
	// the server closes the connection although it kept it alive (no
	// "Connection: close"), as llama.cpp does with some: the connection is
	// kept silent until the client sends its next request on it, and then
	// closed before a byte of the response (see conn.go), so that client
	// sees EOF for it every time rather than only when it loses a race.
	// Which answers close is a pure function of Seed and the arrival
	// number, an independent draw like StallRate's.
	RateCloseAfter float64
	// Flavor is the server the mock is like in its /metrics names, its
	// /v1/models and its refusal of a prompt too long for the context
	// (flavor.go): FlavorVLLM (default), FlavorSGLang or FlavorLlamaCpp.
	Flavor string
	// NoMetrics answers /metrics as a server whose metrics are off:
	// llama-server's 501 (the llama.cpp flavour), else a 404.
	NoMetrics bool
	// RateInvalidJSON is the share of answers to a request asking for a
	// shape (response_format json_schema or json_object, guided_json) whose
	// content is not valid for it (schema.go): cut short, a required key
	// missing, or a value of the wrong type. Which answers is a pure
	// function of Seed and the arrival number, an independent draw like
	// StallRate's.
	RateInvalidJSON float64
	// IgnoreTokenIDs answers without token ids although a request asks
	// for them (return_token_ids), as a server that does not know the
	// field (vLLM before 0.10.2): for clients' detection of one.
	IgnoreTokenIDs bool
	// IgnoreN answers one choice whatever n a request asks for, as a
	// server that does not know OpenAI's n: for clients' detection of one.
	// Else n > 1 is answered with n choices (choices.go).
	IgnoreN bool
	// RPM and TPM are a hosted server's limits of requests and tokens per
	// minute (ratelimit.go): buckets refilled continuously over a minute,
	// OpenAI's x-ratelimit-* headers on every answer, a 429 past them.
	// A request's tokens are its prompt's plus its max_tokens. 0: no limit.
	RPM, TPM int
	// Clock is the limits' clock; nil: time.Now. Tests advance their own.
	Clock func() time.Time
	// CachedTokens makes every answer's usage say that many of its prompt
	// tokens (at most all) were cached, in prompt_tokens_details as OpenAI
	// and vLLM with --enable-prompt-tokens-details do: for clients that
	// price cached tokens apart. 0: the details are null (vLLM's default).
	CachedTokens int
	// PrefixCache keeps a per-server LRU of that many computed prompt
	// prefixes (leading messages; prefixcache.go) and counts the prompt
	// tokens asked and found computed, as vLLM's prefix_cache_queries and
	// prefix_cache_hits. 0: no cache, and the two metrics are not exported.
	PrefixCache int
	// Batch configures /v1/files and /v1/batches (batchapi); its Clock is
	// Clock when nil, its Answer the server's own chat answer.
	Batch batchapi.Options
	// HiddenStates, with a Dir, makes the server an extraction server as
	// vLLM with the extract_hidden_states method and its hidden-states
	// connector is (hidden.go): POST /v1/completions writes the prompt's
	// states under Dir, and every chat request writes a file of its prompt.
	HiddenStates hiddenstates.Options
}

// DefaultModel is the model name served when Options.Model is empty.
const DefaultModel = "mock-model"

// DefaultMeanTokens is the mean answer length when Options.MeanTokens is 0.
const DefaultMeanTokens = 300

// Validate reports the first invalid option, naming it.
func (o Options) Validate() error {
	switch o.ReasoningField {
	case "", FieldReasoning, FieldReasoningContent, FieldBoth, FieldNone:
	default:
		return fmt.Errorf("reasoning field %q: want %s, %s, %s or %s",
			o.ReasoningField, FieldReasoning, FieldReasoningContent, FieldBoth, FieldNone)
	}
	if o.TokenDelay < 0 {
		return fmt.Errorf("token delay %v: must not be negative", o.TokenDelay)
	}
	if o.TTFT < 0 {
		return fmt.Errorf("ttft %v: must not be negative", o.TTFT)
	}
	if o.MeanTokens < 0 {
		return fmt.Errorf("mean tokens %d: must not be negative", o.MeanTokens)
	}
	if o.MaxRunning < 0 {
		return fmt.Errorf("max running %d: must not be negative", o.MaxRunning)
	}
	if o.KVBudget < 0 {
		return fmt.Errorf("kv budget %d: must not be negative", o.KVBudget)
	}
	if o.BatchScale < 0 {
		return fmt.Errorf("batch scale %d: must not be negative", o.BatchScale)
	}
	if o.PrefixCache < 0 {
		return fmt.Errorf("prefix cache %d: must not be negative", o.PrefixCache)
	}
	if !(o.StallRate >= 0 && o.StallRate <= 1) {
		return fmt.Errorf("stall rate %v: must be between 0 and 1", o.StallRate)
	}
	if !validFlavor(o.Flavor) {
		return fmt.Errorf("flavor %q: want %s, %s or %s", o.Flavor, FlavorVLLM, FlavorSGLang, FlavorLlamaCpp)
	}
	if o.StallAfter < 0 {
		return fmt.Errorf("stall after %d: must not be negative", o.StallAfter)
	}
	if !(o.RateCloseAfter >= 0 && o.RateCloseAfter <= 1) {
		return fmt.Errorf("close after rate %v: must be between 0 and 1", o.RateCloseAfter)
	}
	if err := o.Batch.Validate(); err != nil {
		return err
	}
	if o.RPM < 0 || o.TPM < 0 {
		return fmt.Errorf("rpm %d, tpm %d: must not be negative", o.RPM, o.TPM)
	}
	if !(o.RateInvalidJSON >= 0 && o.RateInvalidJSON <= 1) {
		return fmt.Errorf("invalid JSON rate %v: must be between 0 and 1", o.RateInvalidJSON)
	}
	return o.validateFaults()
}

func (o Options) withDefaults() Options {
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.ReasoningField == "" {
		o.ReasoningField = FieldReasoning
	}
	if o.MeanTokens == 0 {
		o.MeanTokens = DefaultMeanTokens
	}
	if o.Flavor == "" {
		o.Flavor = FlavorVLLM
	}
	return o
}

// Stats is a snapshot of a Server's counters.
type Stats struct {
	Requests         int64 // chat completion requests accepted (valid ones)
	Stalled          int64 // requests that stalled on purpose (Options.StallRate)
	Completed        int64 // answers sent in full
	Aborted          int64 // requests whose client went away first
	Running          int64 // being generated now
	Waiting          int64 // queued for a running slot
	PeakRunning      int64 // the most ever running at once
	GenerationTokens int64 // tokens generated, counted as they are produced (Options.CountTokensAtEnd: as answers finish)
	PromptTokens     int64 // prompt tokens of requests that started running
	// Faulted counts requests that ended in an injected fault instead of an
	// answer: once idle, Completed+Aborted+Faulted+TooLong == Requests. A
	// length fault is a complete answer (Completed), not Faulted.
	Faulted int64
	// TooLong counts requests refused with a 400 because their prompt plus
	// max_tokens exceed Options.MaxModelLen.
	TooLong int64
	// Preemptions counts requests preempted by the batch model (KVBudget)
	// and Recomputed the tokens they generated again; both 0 without it.
	Preemptions int64
	Recomputed  int64
	// Injected counts the injected faults by kind (see FaultKinds), restarts
	// included; every kind is present.
	Injected map[string]int64
	// ClosedAfter counts the answers after which the connection was closed
	// on purpose (Options.RateCloseAfter), and DroppedReuses the requests a
	// client then sent on such a connection: the server read their first
	// byte and closed it without answering. Neither is in Requests.
	ClosedAfter   int64
	DroppedReuses int64
	// Held counts the requests an abandoned server holds open without a
	// byte now (see Abandon); they count as Aborted once they end.
	Held int64
	// InvalidJSON counts the answers made not valid for the shape their
	// request asked (Options.RateInvalidJSON); they are Completed.
	InvalidJSON int64
	// PrefixQueries and PrefixHits are the prompt tokens of requests that
	// started running and those of them found in the prefix cache
	// (Options.PrefixCache); the prefill computed is their difference.
	PrefixQueries, PrefixHits int64
	// Limited counts the requests answered 429 for being past Options.RPM
	// or TPM; they are not in Requests.
	Limited int64
}

// Server is the mock: an http.Handler serving vLLM's OpenAI-compatible API.
type Server struct {
	opts      Options
	tok       *tokens
	modelJSON []byte // the model name as a JSON string
	created   int64  // the model's creation time in /v1/models
	mux       *http.ServeMux
	hidden    *hiddenstates.Server // the extraction endpoint (hidden.go); nil when off
	slots     chan struct{}        // nil when MaxRunning is 0 or the batch model is on
	batch     *batch               // the batch model; nil when off

	idPrefix uint64
	idSeq    atomic.Uint64

	requests, completed, aborted atomic.Int64
	stalled                      atomic.Int64
	running, waiting, peak       atomic.Int64
	genTokens, promptTokens      atomic.Int64

	faulty   bool                     // some fault rate is not 0
	faulted  atomic.Int64             // requests ended by a fault
	tooLong  atomic.Int64             // requests refused: longer than MaxModelLen
	injected map[string]*atomic.Int64 // by kind; the map is fixed at New
	restart  chan struct{}            // RestartEvery's signal to Serve

	invalidJSON atomic.Int64 // answers made out of their shape on purpose (schema.go)

	prefix *prefixCache // Options.PrefixCache; nil without

	limits  *limits      // RPM and TPM (ratelimit.go); nil without
	limited atomic.Int64 // requests refused past them

	registry     *prometheus.Registry
	success      *prometheus.CounterVec // vllm:request_success_total{finished_reason}
	faultsMetric *prometheus.CounterVec // mock_faults_injected_total{kind}

	bufs sync.Pool // *[]byte: response assembly buffers

	batches *batchapi.Handler // /v1/files and /v1/batches

	conns conns // what the server holds open on its own: Abandon, RateCloseAfter
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for opts. It panics when opts.Validate fails: callers
// that take options from a person validate them first.
func New(opts Options) *Server {
	if err := opts.Validate(); err != nil {
		panic("mockserver: " + err.Error())
	}
	opts = opts.withDefaults()
	model, _ := json.Marshal(opts.Model) // a string always marshals
	s := &Server{
		opts:      opts,
		tok:       newTokens(opts.ReasoningField),
		modelJSON: model,
		created:   time.Now().Unix(),
		idPrefix:  rand.Uint64(),
		injected:  map[string]*atomic.Int64{},
		restart:   make(chan struct{}, 1),
		limits:    newLimits(opts),
		prefix:    newPrefixCache(opts.PrefixCache),
	}
	for _, r := range opts.rates() {
		s.faulty = s.faulty || r > 0
	}
	for _, k := range FaultKinds() {
		s.injected[k] = new(atomic.Int64)
	}
	switch {
	case opts.KVBudget > 0 || opts.BatchScale > 0:
		s.batch = newBatch(s)
	case opts.MaxRunning > 0:
		s.slots = make(chan struct{}, opts.MaxRunning)
	}
	s.conns.init()
	s.bufs.New = func() any { b := make([]byte, 0, 16<<10); return &b }
	s.registerMetrics()

	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.Handle("POST /v1/chat/completions", s.withHiddenStates(http.HandlerFunc(s.handleChat)))
	s.mux.Handle("GET /metrics", s.flavorMetrics())
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {})
	bo := opts.Batch
	if bo.Answer = batchapi.ViaHandler(http.HandlerFunc(s.handleChat)); bo.Clock == nil {
		bo.Clock = opts.Clock
	}
	s.batches = batchapi.New(bo)
	s.batches.Mount(s.mux)
	return s
}

// Batches is the Files and Batch APIs' handler, for tests' holds.
func (s *Server) Batches() *batchapi.Handler { return s.batches }

// ServeHTTP routes a request to one of the endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Options returns the options in force, defaults applied.
func (s *Server) Options() Options { return s.opts }

// Stats returns a snapshot of the counters. Each field is read atomically;
// the fields together are not one instant.
func (s *Server) Stats() Stats {
	queries, hits := s.prefix.counts()
	return Stats{
		Requests:         s.requests.Load(),
		Stalled:          s.stalled.Load(),
		Completed:        s.completed.Load(),
		Aborted:          s.aborted.Load(),
		Running:          s.running.Load(),
		Waiting:          s.waiting.Load(),
		PeakRunning:      s.peak.Load(),
		GenerationTokens: s.genTokens.Load(),
		PromptTokens:     s.promptTokens.Load(),
		Faulted:          s.faulted.Load(),
		TooLong:          s.tooLong.Load(),
		Preemptions:      s.preemptions(),
		Recomputed:       s.recomputed(),
		Injected:         s.injectedCounts(),
		ClosedAfter:      s.conns.closedAfter.Load(),
		DroppedReuses:    s.conns.droppedReuses.Load(),
		Held:             s.conns.held.Load(),
		InvalidJSON:      s.invalidJSON.Load(),
		Limited:          s.limited.Load(),
		PrefixQueries:    queries,
		PrefixHits:       hits,
	}
}

func (s *Server) preemptions() int64 {
	if s.batch == nil {
		return 0
	}
	return s.batch.preemptions.Load()
}

func (s *Server) recomputed() int64 {
	if s.batch == nil {
		return 0
	}
	return s.batch.recomputed.Load()
}

func (s *Server) injectedCounts() map[string]int64 {
	m := make(map[string]int64, len(s.injected))
	for k, v := range s.injected {
		m[k] = v.Load()
	}
	return m
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	if s.flavorModels(w) {
		return
	}
	type permission struct {
		ID                 string  `json:"id"`
		Object             string  `json:"object"`
		Created            int64   `json:"created"`
		AllowCreateEngine  bool    `json:"allow_create_engine"`
		AllowSampling      bool    `json:"allow_sampling"`
		AllowLogprobs      bool    `json:"allow_logprobs"`
		AllowSearchIndices bool    `json:"allow_search_indices"`
		AllowView          bool    `json:"allow_view"`
		AllowFineTuning    bool    `json:"allow_fine_tuning"`
		Organization       string  `json:"organization"`
		Group              *string `json:"group"`
		IsBlocking         bool    `json:"is_blocking"`
	}
	type model struct {
		ID          string       `json:"id"`
		Object      string       `json:"object"`
		Created     int64        `json:"created"`
		OwnedBy     string       `json:"owned_by"`
		Root        string       `json:"root"`
		Parent      *string      `json:"parent"`
		MaxModelLen int          `json:"max_model_len"`
		Permission  []permission `json:"permission"`
	}
	body := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{
		ID: s.opts.Model, Object: "model", Created: s.created, OwnedBy: "vllm",
		Root: s.opts.Model, MaxModelLen: cmp.Or(s.opts.MaxModelLen, maxTokenLimit),
		Permission: []permission{{
			ID: "modelperm-" + strconv.FormatUint(s.idPrefix, 16), Object: "model_permission",
			Created: s.created, AllowSampling: true, AllowLogprobs: true, AllowView: true,
			Organization: "*",
		}},
	}}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body) // a write error means the client left
}

// writeError answers with vLLM's error shape; an empty param is null.
func writeError(w http.ResponseWriter, code int, typ, msg, param string) {
	var p *string
	if param != "" {
		p = &param
	}
	b, _ := json.Marshal(struct {
		Object  string  `json:"object"`
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	}{"error", msg, typ, p, code})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// stalls says whether the id-th request stalls on purpose (StallRate): a
// draw from (Seed, id), the same on every run.
func (s *Server) stalls(id uint64) bool {
	return s.opts.StallRate != 0 && s.draw(id, 0) < s.opts.StallRate
}

// acquire waits for a running slot in FIFO order (blocked channel senders
// are served first come, first served) and counts the request as running.
// It fails when the request's context ends first, or when the server is
// abandoned before the request runs (see Abandon).
func (s *Server) acquire(done <-chan struct{}) bool {
	if s.abandoned() {
		return false
	}
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
		default:
			s.waiting.Add(1)
			select {
			case s.slots <- struct{}{}:
				s.waiting.Add(-1)
			case <-done:
				s.waiting.Add(-1)
				return false
			case <-s.conns.abandon:
				s.waiting.Add(-1)
				return false
			}
		}
		if s.abandoned() { // a slot and Abandon came at once: Abandon wins
			<-s.slots
			return false
		}
	}
	n := s.running.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return true
}

func (s *Server) release(q *seq) {
	if s.batch != nil {
		s.batch.leave(q)
		return
	}
	s.running.Add(-1)
	if s.slots != nil {
		<-s.slots
	}
}
