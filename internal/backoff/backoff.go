// Package backoff computes the waits between retries: exponential, capped,
// with full jitter where many clients retry at once, and a wait that ends
// with its context.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: Initial after the first failure,
// doubling after each one, never more than Max.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
}

// Ceiling is the wait after the attempt-th failure (1-based) without
// jitter: Initial·2^(attempt-1), capped at Max, for any attempt however
// large (the doubling stops at the cap, so it cannot overflow). It is 0
// when Initial or Max is not positive; an attempt below 1 counts as 1.
// One caller retrying alone (a prober, a download) can wait this long.
func (p Policy) Ceiling(attempt int) time.Duration {
	if p.Initial <= 0 || p.Max <= 0 {
		return 0
	}
	c := min(p.Initial, p.Max)
	for i := 1; i < attempt && c < p.Max; i++ {
		if c > p.Max/2 {
			return p.Max
		}
		c *= 2
	}
	return c
}

// Delay is the wait after the attempt-th failure with full jitter: uniform
// in [0, Ceiling(attempt)], both ends included, so that many clients turned
// away together do not come back in lockstep.
func (p Policy) Delay(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	switch {
	case c <= 0:
		return 0
	case c == math.MaxInt64:
		// c+1 would overflow: every non-negative int64 is in range.
		return time.Duration(rand.Int64())
	}
	return rand.N(c + 1)
}

// Sleep waits d or until ctx ends; it reports whether the wait completed
// (false when ctx ended, even with d <= 0).
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
