package wire

// What a hosted server states of its rate limits in an answer's headers,
// as OpenAI's API does on every answer, 2xx and 429 alike:
// x-ratelimit-limit-requests, x-ratelimit-remaining-requests,
// x-ratelimit-reset-requests (the time until the bucket is full again,
// "1s", "6m0s", "20ms"), and the same for -tokens.

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limit is one of a server's stated limits; Known is false when the
// answer said nothing of it.
type Limit struct {
	Known     bool
	Limit     int64         // per minute (OpenAI's buckets hold a minute's worth)
	Remaining int64         // left in the bucket when the request was admitted (or refused)
	Reset     time.Duration // until the bucket is full again; 0 when not said
}

// Limits are an answer's stated limits, of requests and of tokens.
type Limits struct {
	Requests, Tokens Limit
}

// Known reports whether the answer stated any limit.
func (l Limits) Known() bool { return l.Requests.Known || l.Tokens.Known }

// parseLimits reads the x-ratelimit-* headers of h; a header that does not
// parse is as if absent. It runs on every answer, and most servers (vLLM,
// the mock) state no limits: the keys are written in their canonical form,
// so no lookup builds or canonicalizes a string.
func parseLimits(h http.Header) Limits {
	if h == nil {
		return Limits{}
	}
	return Limits{Requests: parseLimit(h, &requestLimitKeys), Tokens: parseLimit(h, &tokenLimitKeys)}
}

// limitKeys are one limit's headers, canonical: limit, remaining, reset.
type limitKeys [3]string

var (
	requestLimitKeys = limitKeys{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"}
	tokenLimitKeys   = limitKeys{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}
)

func parseLimit(h http.Header, k *limitKeys) Limit {
	v := h[k[0]] // as h.Get: a canonical key needs no canonicalizing
	if len(v) == 0 {
		return Limit{}
	}
	limit, err1 := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	left, err2 := strconv.ParseInt(strings.TrimSpace(h.Get(k[1])), 10, 64)
	if err1 != nil || err2 != nil || limit <= 0 || left < 0 {
		return Limit{}
	}
	return Limit{Known: true, Limit: limit, Remaining: left, Reset: parseReset(h.Get(k[2]))}
}

// parseReset reads a reset time in OpenAI's forms ("1s", "6m0s", "20ms",
// Go's duration syntax) or as plain seconds; anything else, or negative, is 0.
func parseReset(v string) time.Duration {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 && secs < 1e9 {
		return time.Duration(secs * float64(time.Second))
	}
	return 0
}

// retryAfter is how long a 429 or 503 asks the client to wait: OpenAI's
// retry-after-ms when it is there (finer than Retry-After's seconds), else
// Retry-After.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("retry-after-ms")), 64); err == nil && ms > 0 && ms < 1e12 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	return parseRetryAfter(h.Get("Retry-After"), now)
}
