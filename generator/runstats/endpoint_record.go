package runstats

import (
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// EndpointRecord is one endpoint's figures in JSON: an entry of a progress
// record's endpoints (--log-format json, status.json, report.json).
type EndpointRecord struct {
	URL              string     `json:"url"`   // passwords masked
	State            string     `json:"state"` // up, down (its gate closed), probing (down, being asked)
	DownSince        *time.Time `json:"down_since,omitempty"`
	DownReason       string     `json:"down_reason,omitempty"` // while down: why (its probe's error, or its recent failures)
	InFlight         int64      `json:"in_flight"`
	Limit            int64      `json:"limit,omitempty"` // its own cap of requests in flight, when set
	Requests         int64      `json:"requests"`        // attempts it answered
	Failures         int64      `json:"failures"`        // attempts that failed on it
	Completed        int64      `json:"completed"`       // answers it completed
	CompletionTokens int64      `json:"completion_tokens"`
	ReqPerS          float64    `json:"req_per_s"`
	TokPerS          float64    `json:"tok_per_s"`
	ReqPerS10s       float64    `json:"req_per_s_10s"`
	TokPerS10s       float64    `json:"tok_per_s_10s"`
	ReqPerS60s       float64    `json:"req_per_s_60s"`
	TokPerS60s       float64    `json:"tok_per_s_60s"`
	// Paced are its requests waiting for their share of its rate limits
	// now, PacedBy the limit that binds: requests or tokens.
	Paced   int64  `json:"paced,omitempty"`
	PacedBy string `json:"paced_by,omitempty"`
	// PrefixHeldEst is the client's estimate of the share of the prompt
	// tokens sent here that a prefix sent here before covers: the prefill
	// it expects the server's prefix cache to save (compare the server's
	// prefix_cache_hit_rate). Absent before an answer.
	PrefixHeldEst *float64 `json:"prefix_held_est,omitempty"`
	// Server is this endpoint's own /metrics, when the caller scrapes each
	// (the record's server field is their sum).
	Server *ServerRecord `json:"server,omitempty"`
}

// newEndpointRecords is the JSON form of eps; nil with fewer than two (one
// endpoint's figures are the run's).
func newEndpointRecords(eps []EndpointSnapshot) []EndpointRecord {
	if len(eps) < 2 {
		return nil
	}
	out := make([]EndpointRecord, len(eps))
	for i, e := range eps {
		out[i] = EndpointRecord{
			URL: e.URL, State: e.State, DownReason: e.Reason, InFlight: e.InFlight, Limit: e.Limit,
			Requests: e.Requests, Failures: e.Failures, Completed: e.Completed, CompletionTokens: e.CompletionTokens,
			ReqPerS: e.ReqPerSec, TokPerS: e.TokPerSec,
			ReqPerS10s: e.Last10s.ReqPerSec, TokPerS10s: e.Last10s.TokPerSec,
			ReqPerS60s: e.Last60s.ReqPerSec, TokPerS60s: e.Last60s.TokPerSec,
			Paced: e.Paced, PacedBy: e.PacedBy,
		}
		if e.PlacedPrompt > 0 {
			out[i].PrefixHeldEst = finite(float64(e.PlacedHeld) / float64(e.PlacedPrompt))
		}
		if !e.DownSince.IsZero() {
			t := e.DownSince
			out[i].DownSince = &t
		}
	}
	return out
}

// SetEndpointServers puts each endpoint's own server view (its /metrics,
// in base_url order; nil where it could not be read) on the record's
// endpoints.
func (rec *ProgressRecord) SetEndpointServers(rates []*promscrape.Rates) {
	for i := range rec.Endpoints {
		if i < len(rates) && rates[i] != nil {
			rec.Endpoints[i].Server = NewServerRecord(*rates[i])
		}
	}
}
