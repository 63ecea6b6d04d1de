package runstats

// The progress record: one JSON object of every figure of a Snapshot (and
// the server's own view), the form of `--log-format json`, status.json and
// report.json.

import (
	"math"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// ProgressRecord is the JSON form of one progress report: a --log-format
// json line, and the figures of DIR/status.json and DIR/report.json (see
// status.go). Durations are seconds. Its fields, their names and their
// order are read by users' scripts: they change only on purpose.
type ProgressRecord struct {
	Event          string           `json:"event"` // "progress"
	Time           time.Time        `json:"time"`
	ElapsedS       float64          `json:"elapsed_s"`
	Done           int64            `json:"done"`  // keys done, earlier runs included
	Total          int64            `json:"total"` // keys of the job, earlier runs included
	AlreadyDone    int64            `json:"already_done"`
	AlreadyFailed  int64            `json:"already_failed"` // keys that failed for good in earlier runs, not asked again (no --retry-errors): not done
	Errors         int64            `json:"errors"`
	ErrorsByCause  map[string]int64 `json:"errors_by_cause"`
	Retries        int64            `json:"retries"`
	RetriesByCause map[string]int64 `json:"retries_by_cause"`
	// RetryLast is the message of the last retried error of each cause.
	RetryLast map[string]string `json:"retry_last,omitempty"`
	InFlight  int64             `json:"in_flight"`
	// NoByteYet is the streams in flight that have had no byte, not even
	// headers (a server's queue that says nothing); omitted at 0.
	NoByteYet int64 `json:"no_byte_yet,omitempty"`
	// ServerDownSince is set while the server refuses connections.
	ServerDownSince *time.Time `json:"server_down_since,omitempty"`

	// ReqPerS and the windows' count keys done (a record each);
	// RequestsPerS the requests the servers answered, every turn's, shown
	// only when it differs (generation.turns: all).
	ReqPerS          float64  `json:"req_per_s"`
	RequestsPerS     *float64 `json:"requests_per_s,omitempty"`
	TokPerS          float64  `json:"tok_per_s"`
	PromptTokPerS    float64  `json:"prompt_tok_per_s"`
	ReqPerS10s       float64  `json:"req_per_s_10s"`
	TokPerS10s       float64  `json:"tok_per_s_10s"`
	ReqPerS60s       float64  `json:"req_per_s_60s"`
	TokPerS60s       float64  `json:"tok_per_s_60s"`
	CompletionTokens int64    `json:"completion_tokens"`
	PromptTokens     int64    `json:"prompt_tokens"`

	CompletionAvg  float64 `json:"completion_avg"`
	CompletionP50  int64   `json:"completion_p50"`
	CompletionP90  int64   `json:"completion_p90"`
	CompletionMax  int64   `json:"completion_max"`
	TruncatedShare float64 `json:"truncated_share"`
	TTFTP50S       float64 `json:"ttft_p50_s"`
	TTFTP90S       float64 `json:"ttft_p90_s"`
	ITLP50S        float64 `json:"itl_p50_s"`
	ITLP90S        float64 `json:"itl_p90_s"`

	ExpectedCompletion float64  `json:"expected_completion"`
	ETAS               *float64 `json:"eta_s"` // null while unknown
	ETAErrorS          *float64 `json:"eta_error_s,omitempty"`
	ETAConfidence      string   `json:"eta_confidence"`

	// Cost is what this run's answers cost so far in USD at
	// endpoint.price, CostProjected that plus the mean answer's cost for
	// each request to come (absent until the first answer); both absent
	// without a price.
	Cost          *float64 `json:"cost,omitempty"`
	CostProjected *float64 `json:"cost_projected,omitempty"`
	// CostBilled is what every answer the server sent cost, those thrown
	// away (retried, refused, failed) too; absent without a price.
	CostBilled *float64 `json:"cost_billed,omitempty"`

	Server *ServerRecord `json:"server,omitempty"`
	// Endpoints are each endpoint's figures, with several (endpoint.base_url
	// a list); absent with one, whose figures are the run's.
	Endpoints []EndpointRecord `json:"endpoints,omitempty"`
	// Paced are the requests waiting now for their share of the
	// endpoints' rate limits (pacing), PacedBy the limit that binds:
	// requests or tokens. Absent while none waits.
	Paced   int64  `json:"paced,omitempty"`
	PacedBy string `json:"paced_by,omitempty"`
	// Batches are the directory's batches (batch.enabled), each with its
	// state in DIR/batches.json and the server's status and counts.
	Batches []BatchRecord `json:"batches,omitempty"`
}

// BatchRecord is one batch of the batch mode, as the progress record shows it.
type BatchRecord struct {
	Number    int    `json:"number"`
	State     string `json:"state"`
	Status    string `json:"status,omitempty"`
	Requests  int    `json:"requests"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
}

// ServerRecord is the server's view in JSON: the server field of a
// ProgressRecord, and a line of `synthgen watch --json`.
type ServerRecord struct {
	URL  string `json:"url,omitempty"`
	Time string `json:"time,omitempty"`
	// Kind is the server's: "vllm", "sglang" or "llamacpp", from the names
	// of its metrics; absent when not known (or replicas of several kinds).
	Kind    string  `json:"kind,omitempty"`
	WindowS float64 `json:"window_s"`
	// AgeS is how old the figures are, from the sample they end at, when
	// the progress record before showed the same (no newer sample came
	// since); absent when they were measured since the record before.
	AgeS                     *float64 `json:"age_s,omitempty"`
	GenTokPerS               float64  `json:"gen_tok_per_s"`
	PromptTokPerS            float64  `json:"prompt_tok_per_s"`
	Running                  float64  `json:"running"`
	Waiting                  float64  `json:"waiting"`
	KVCacheUsage             *float64 `json:"kv_cache_usage,omitempty"`
	Preemptions              *float64 `json:"preemptions,omitempty"` // absent: the server exposes no such counter
	SpecAcceptanceRate       *float64 `json:"spec_acceptance_rate,omitempty"`
	SpecMeanAcceptanceLength *float64 `json:"spec_mean_acceptance_length,omitempty"`
	// PrefixCacheHitRate is the share of prompt tokens the server found in
	// its prefix cache over the window; absent when it reports none.
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	// With several replicas, how many answered their last scrape (the
	// figures are their sum) of how many there are.
	ReplicasSummed int `json:"replicas_summed,omitempty"`
	Replicas       int `json:"replicas,omitempty"`
}

// NewServerRecord is the JSON form of the server's rates; URL and Time are
// left for the caller.
func NewServerRecord(r promscrape.Rates) *ServerRecord {
	out := &ServerRecord{
		WindowS:       r.Window.Seconds(),
		GenTokPerS:    r.GenTokPerSec,
		PromptTokPerS: r.PromptTokPerSec,
		Running:       r.Running,
		Waiting:       r.Waiting,
	}
	if r.Kind.Known() {
		out.Kind = string(r.Kind)
	}
	if r.HasPreemptions {
		out.Preemptions = finite(r.Preemptions)
	}
	if r.Of > 1 {
		out.ReplicasSummed, out.Replicas = r.Servers, r.Of
	}
	if r.HasKV {
		out.KVCacheUsage = finite(r.KVCacheUsage)
	}
	if r.HasPrefix {
		out.PrefixCacheHitRate = finite(r.PrefixHitRate)
	}
	if r.HasSpec {
		out.SpecAcceptanceRate = finite(r.AcceptanceRate)
		out.SpecMeanAcceptanceLength = finite(r.MeanAcceptanceLength)
	}
	return out
}

// finite returns a pointer to v, or nil for NaN and infinities, which JSON
// cannot carry.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// NewProgressRecord is the record of s, with the server's view when server
// is not nil (the rates between the last two scrapes of its /metrics).
func NewProgressRecord(s Snapshot, server *promscrape.Rates) ProgressRecord {
	rec := ProgressRecord{
		Event: "progress", Time: s.At, ElapsedS: s.Elapsed.Seconds(),
		Done: s.Completed(), Total: s.Planned(), AlreadyDone: s.AlreadyDone, AlreadyFailed: s.AlreadyFailed,
		Errors: s.Errors, ErrorsByCause: s.ErrorsByCause, Retries: s.Retries, RetriesByCause: s.RetriesByCause, RetryLast: s.RetryLast,
		InFlight: s.InFlight, NoByteYet: s.Awaiting,
		ReqPerS: s.ReqPerSec, TokPerS: s.TokPerSec, PromptTokPerS: s.PromptTokPerSec,
		ReqPerS10s: s.Last10s.ReqPerSec, TokPerS10s: s.Last10s.TokPerSec,
		ReqPerS60s: s.Last60s.ReqPerSec, TokPerS60s: s.Last60s.TokPerSec,
		CompletionTokens: s.CompletionTokens, PromptTokens: s.PromptTokens,
		CompletionAvg: s.CompletionAvg, CompletionP50: s.CompletionP50, CompletionP90: s.CompletionP90,
		CompletionMax: s.CompletionMax, TruncatedShare: s.TruncatedShare,
		TTFTP50S: s.TTFTP50.Seconds(), TTFTP90S: s.TTFTP90.Seconds(),
		ITLP50S: s.ITLP50.Seconds(), ITLP90S: s.ITLP90.Seconds(),
		ETAConfidence: s.Confidence,
		Batches:       s.Batches,
	}
	if !s.ServerDownSince.IsZero() {
		t := s.ServerDownSince
		rec.ServerDownSince = &t
	}
	if v := finite(s.ExpectedCompletion); v != nil {
		rec.ExpectedCompletion = *v
	}
	if s.ETAKnown {
		rec.ETAS = finite(s.ETA.Seconds())
		if s.ETAError > 0 {
			rec.ETAErrorS = finite(s.ETAError.Seconds())
		}
	}
	if s.Priced {
		rec.Cost, rec.CostBilled = finite(s.Cost), finite(s.Billed)
		if s.Done > 0 {
			rec.CostProjected = finite(s.CostProjected)
		}
	}
	if server != nil {
		rec.Server = NewServerRecord(*server)
	}
	rec.Endpoints = newEndpointRecords(s.Endpoints)
	rec.Paced, rec.PacedBy = s.Paced()
	if s.SeveralTurns() {
		rec.RequestsPerS = finite(s.RequestsPerSec())
	}
	return rec
}
