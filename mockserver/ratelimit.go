package mockserver

// A hosted server's rate limits (Options.RPM, Options.TPM): a bucket of
// requests and one of tokens, each holding a minute's worth and refilled
// continuously over the minute, as OpenAI's are. A request costs one
// request and, as providers count at admission, its prompt's tokens plus
// the max_tokens it asks for. Every answer carries OpenAI's x-ratelimit-*
// headers; a request past either limit is answered 429 with retry-after and
// retry-after-ms, and costs nothing.

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limits are the server's buckets; nil when neither limit is set.
type limits struct {
	now      func() time.Time
	mu       sync.Mutex // admission reads and takes both buckets as one
	req, tok *rate.Limiter
}

func newLimits(o Options) *limits {
	if o.RPM == 0 && o.TPM == 0 {
		return nil
	}
	l := &limits{now: o.Clock}
	if l.now == nil {
		l.now = time.Now
	}
	bucket := func(perMinute int) *rate.Limiter {
		if perMinute == 0 {
			return nil
		}
		return rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute) // full
	}
	l.req, l.tok = bucket(o.RPM), bucket(o.TPM)
	return l
}

// admit takes one request costing tokens from the buckets, or, past either
// limit, takes nothing and says how long until it would fit. Either way it
// sets the x-ratelimit-* headers of what remains.
func (l *limits) admit(h http.Header, tokens int) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.tok != nil {
		tokens = min(tokens, l.tok.Burst()) // a request larger than the minute waits for a full bucket
	}
	wait = max(need(l.req, now, 1), need(l.tok, now, tokens))
	if ok = wait == 0; ok {
		if l.req != nil {
			l.req.AllowN(now, 1)
		}
		if l.tok != nil {
			l.tok.AllowN(now, tokens)
		}
	}
	setLimitHeaders(h, "requests", l.req, now)
	setLimitHeaders(h, "tokens", l.tok, now)
	return wait, ok
}

// need is how long until b holds n; 0 when it does now or b is nil.
func need(b *rate.Limiter, now time.Time, n int) time.Duration {
	if b == nil {
		return 0
	}
	have := b.TokensAt(now)
	if have >= float64(n) {
		return 0
	}
	return time.Duration((float64(n) - have) / float64(b.Limit()) * float64(time.Second))
}

func setLimitHeaders(h http.Header, what string, b *rate.Limiter, now time.Time) {
	if b == nil {
		return
	}
	have := max(b.TokensAt(now), 0)
	full := time.Duration((float64(b.Burst()) - have) / float64(b.Limit()) * float64(time.Second))
	h.Set("x-ratelimit-limit-"+what, strconv.Itoa(b.Burst()))
	h.Set("x-ratelimit-remaining-"+what, strconv.Itoa(int(have)))
	h.Set("x-ratelimit-reset-"+what, resetForm(full))
}

// resetForm writes a duration as OpenAI's reset headers do: "20ms" below
// a second, else Go's form in whole milliseconds ("1s", "6m0s", "1.5s").
func resetForm(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return d.Round(time.Millisecond).String()
}

// refuseLimited answers 429 when the request is past a limit; it reports
// whether it did.
func (s *Server) refuseLimited(w http.ResponseWriter, req *chatRequest) bool {
	if s.limits == nil {
		return false
	}
	wait, ok := s.limits.admit(w.Header(), req.promptTokens()+req.limit())
	if ok {
		return false
	}
	s.limited.Add(1)
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	w.Header().Set("retry-after-ms", strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	writeError(w, http.StatusTooManyRequests, "RateLimitError", "mock: rate limit reached (requests or tokens per minute); retry after "+resetForm(wait), "")
	return true
}
