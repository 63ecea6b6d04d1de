package runstats

import (
	"math"
	"time"
)

// inFlight is one request in flight as the ETA sees it: what it streamed
// so far and its own rate (Tracker.ownRate; 0 unknown).
type inFlight struct {
	tokens int64
	rate   float64
}

// etaOf sets the remaining tokens and the ETA from the product-limit
// estimate (snap.ExpectedCompletion is its mean) and the requests in
// flight, sorted by tokens, with their mean residual lengths (kaplanMeier).
//
// A request in flight at c tokens still needs, on average, what the
// answers longer than c had beyond c: the curve's mean residual length at
// c, which is 0 only past the longest answer seen. The run cannot end
// before its slowest request in flight has streamed that at its own rate,
// however fast the server is overall: in the tail, with a few long
// answers left, the overall rate of the last minute says "0s" while they
// need tens of seconds more. So the ETA is the larger of the remaining
// tokens over the overall rate and the longest of those own times.
func etaOf(snap *Snapshot, flight []inFlight, residual []float64) {
	l := snap.ExpectedCompletion
	// Started: every request not ended, whether it holds its slot or its
	// answer waits for the writer.
	notStarted := max(snap.Total-snap.Done-snap.Errors-int64(len(flight)), 0)
	snap.notStarted, snap.flight = notStarted, int64(len(flight))
	rem := float64(notStarted) * l
	var tail float64 // seconds the slowest request in flight still needs
	for k, f := range flight {
		left := residual[k]
		rem += left
		if f.rate > 0 {
			tail = max(tail, left/f.rate)
		}
	}
	snap.RemainingTokens = rem
	rate := snap.Last60s.TokPerSec
	if snap.Total > 0 && notStarted == 0 && len(flight) == 0 {
		snap.ETAKnown = true // nothing left
		return
	}
	if !snap.ServerDownSince.IsZero() {
		snap.ETAUnknown = "outage"
		return
	}
	if len(snap.Batches) > 0 {
		snap.ETAUnknown = "batch"
		return
	}
	if rate <= 0 || l <= 0 {
		return
	}
	snap.ETAKnown = true
	byRate := rem / rate
	// The error bar is what the estimate has earned: the lengths' standard
	// error for the requests to come, and the rate's own, which is
	// measured on the answers of its window (a count: relative error
	// 1/sqrt(n)). A few answers in a short window make a wide bar however
	// steady the lengths look.
	var errLen float64
	if se := snap.ExpectedCompletionSE; !math.IsNaN(se) {
		errLen = float64(notStarted+int64(len(flight))) * se / rate
	}
	rel := rateError(snap.Last60s)
	snap.byRate, snap.byRateErr = byRate, math.Hypot(errLen, byRate*rel)
	if tail > byRate {
		snap.ETA = secondsToDuration(tail)
		snap.ETAError = secondsToDuration(tail * max(rel, 1/math.Sqrt(float64(max(snap.Done, 1)))))
		return
	}
	snap.ETA = secondsToDuration(byRate)
	snap.ETAError = secondsToDuration(snap.byRateErr)
}

// rateError is the relative standard error of a window's rate: its
// answers are a count, so 1/sqrt(n); 1 (all of it) with none.
func rateError(w Throughput) float64 {
	n := w.ReqPerSec * w.Span.Seconds()
	if n < 1 {
		return 1
	}
	return 1 / math.Sqrt(n)
}

// paceOf holds the ETA to what the endpoints' rate limits allow
// (endpoint.max_requests_per_minute, max_tokens_per_minute, or the
// limits a server states): when every endpoint up is paced, the requests
// still to send cannot go faster than the sum of their paces, less what
// the buckets admit at once, and the last of them then takes an answer's
// time. The rate of the last minute alone misses it: a full bucket's
// burst at the start makes a rate the pacing does not keep. With several
// turns a key is several requests (the turns the completed keys took).
func paceOf(snap *Snapshot) {
	if !snap.ETAKnown || snap.Total == 0 || len(snap.Endpoints) == 0 {
		return
	}
	var perSec, ready float64
	for _, e := range snap.Endpoints {
		if e.State != EndpointUp {
			continue
		}
		if e.PacePerSec <= 0 {
			return // an endpoint up without limits: the pace binds nothing
		}
		perSec += e.PacePerSec
		ready += e.PaceReady
	}
	if perSec <= 0 {
		return
	}
	// The requests not yet given their share: every key to come and every
	// key in flight takes perKey requests; those in flight have had
	// flightTurns answered and hold one more (sent, or waiting with its
	// share reserved, which ready counts).
	need := float64(snap.notStarted+snap.flight)*snap.perKey - float64(snap.flightTurns+snap.flight)
	admit := max(need-ready, 0) / perSec
	if need-ready <= 0 {
		return // the buckets admit every request left at once
	}
	// An answer's time: by Little's law, the requests at the servers over
	// the rate they answer at; before any answer, the first token's time
	// and a request's tokens at the inter-token latency.
	answer := snap.TTFTP50.Seconds() + snap.ExpectedCompletion/max(snap.perKey, 1)*snap.ITLP50.Seconds()
	var atServer int64
	var answering float64
	for _, e := range snap.Endpoints {
		atServer += max(e.InFlight-e.Paced, 0)
		answering += e.Last60s.ReqPerSec
	}
	if atServer > 0 && answering > 0 {
		answer = float64(atServer) / answering
	}
	paced := admit + answer // the last request sent, then its answer
	// While requests wait for their share the pace is what holds the run
	// back, not the server: the ETA is the pace's. The last minute's rate
	// would mix the burst before with the waits now, and the requests' own
	// rates no longer tell the tail (a key between paced turns streams
	// nothing while it waits). With none waiting the server may be the
	// slower: the larger of the two.
	if waiting, _ := snap.Paced(); waiting == 0 && paced <= snap.byRate {
		snap.ETA, snap.ETAError = secondsToDuration(snap.byRate), secondsToDuration(snap.byRateErr)
		return
	}
	snap.ETA = secondsToDuration(paced)
	// The pace is known; what it has not earned is whether the server
	// keeps up with it (the last minute's count), one request's interval,
	// and the answer's time from the answers so far.
	answerErr := answer / math.Sqrt(float64(max(snap.Done, 1)))
	snap.ETAError = secondsToDuration(math.Sqrt(sq(admit*rateError(snap.Last60s)) + sq(1/perSec) + sq(answerErr)))
}

func sq(x float64) float64 { return x * x }

func secondsToDuration(s float64) time.Duration {
	if s >= math.MaxInt64/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}

func confidence(done int64) string {
	switch {
	case done < 30:
		return "low"
	case done < 300:
		return "medium"
	default:
		return "high"
	}
}

// RequestsPerSec is the requests the endpoints answered a second since
// the run's first, every turn's (their ReqPerSec summed). ReqPerSec counts
// keys: with generation.turns: all a conversation of five turns is one
// key and five requests, so the two differ by the turns a key takes.
func (s Snapshot) RequestsPerSec() float64 {
	var r float64
	for _, e := range s.Endpoints {
		r += e.ReqPerSec
	}
	return r
}

// SeveralTurns reports whether the servers answered more requests than
// the keys done (RequestsPerSec above ReqPerSec): then a rate of keys and
// one of requests are two figures, and both are shown.
func (s Snapshot) SeveralTurns() bool {
	return s.ReqPerSec > 0 && s.RequestsPerSec() > s.ReqPerSec*1.01
}
