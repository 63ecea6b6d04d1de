package pool

// A replica's health is what its answers say. Its gate (outage.go) asks
// only whether the server is there, by its model list; a replica that lists
// its model and then answers every request with a 500, a 429, a reset or an
// HTML page is there, and with nothing in flight (each attempt fails at
// once) it is the least loaded, so it would draw every retry. So, with
// several endpoints, the router remembers the outcome of each endpoint's
// last attempts. One whose recent attempts mostly failed for reasons of its
// own (replicaFault) is taken out: no request goes to it but a trial, one
// real request at a time, spaced by a doubling wait, and the first trial
// that succeeds lets it back in. A Retry-After holds one replica back the
// same way, for what it asked, at most max_backoff, and not the slots: they
// go to the others. With one endpoint none of this applies, since there is
// nowhere else to go; its failures are retried and charged as always.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/synthgen/synthgen/generator/wire"
)

const (
	healthWindow = 20  // attempts remembered per endpoint
	healthMin    = 10  // attempts in the window before an endpoint may be taken out
	healthSick   = 0.8 // share of failed attempts in the window that takes it out

	trialFirst = time.Second      // wait before a sick endpoint's first trial
	trialMax   = 30 * time.Second // the longest wait between trials
)

// health is one endpoint's recent record, guarded by its router's lock.
type health struct {
	ring  [healthWindow]string // "" a success, else the failure's cause
	n     int                  // attempts in ring (up to healthWindow)
	next  int                  // where the next outcome goes
	fails int                  // failures in ring

	sick    bool
	since   time.Time // when it was taken out
	reason  string    // why: "20 of the last 20 attempts failed (http_500)"
	trial   bool      // a trial request is in flight
	trialAt time.Time // the next trial may go from then on
	trials  int       // trials failed in a row

	holdUntil time.Time // a Retry-After: no request before then
	holdSince time.Time // when the hold began
	holdWhy   string    // what asked for it
}

// note records one attempt's outcome: cause "" a success, else the cause of
// a failure that was the replica's.
func (h *health) note(cause string) {
	if h.n == healthWindow {
		if h.ring[h.next] != "" {
			h.fails--
		}
	} else {
		h.n++
	}
	h.ring[h.next] = cause
	if cause != "" {
		h.fails++
	}
	h.next = (h.next + 1) % healthWindow
}

// failing reports whether the window says the endpoint should be taken out.
func (h *health) failing() bool {
	return h.n >= healthMin && float64(h.fails) >= healthSick*float64(h.n)
}

// takeOut marks the endpoint sick from now, with its reason.
func (h *health) takeOut(now time.Time) {
	h.sick, h.since, h.trials = true, now, 0
	h.trialAt = now.Add(trialFirst)
	h.reason = h.describe()
}

// letIn ends a sickness (a trial succeeded): the window starts afresh, so
// the failures that took it out do not take it out again at once.
func (h *health) letIn() {
	*h = health{holdUntil: h.holdUntil, holdSince: h.holdSince, holdWhy: h.holdWhy}
}

// hold holds the endpoint back until now+d, for cause's Retry-After asked.
func (h *health) hold(now time.Time, d, asked time.Duration, cause string) {
	until := now.Add(d)
	if !until.After(h.holdUntil) {
		return
	}
	if !h.held(now) {
		h.holdSince = now
	}
	h.holdUntil = until
	h.holdWhy = fmt.Sprintf("%s with Retry-After %v: held back %v", cause, asked, d)
	if d < asked {
		h.holdWhy += " (max_backoff)"
	}
}

// trialFailed schedules the next trial after a failed one, the wait
// doubling from trialFirst to trialMax.
func (h *health) trialFailed(now time.Time) {
	h.trial = false
	h.trials++
	wait := trialFirst << min(h.trials, 5)
	h.trialAt = now.Add(min(wait, trialMax))
	h.reason = h.describe()
}

// trialDue reports whether a sick endpoint may be sent its next trial.
func (h *health) trialDue(now time.Time) bool {
	return h.sick && !h.trial && !now.Before(h.trialAt)
}

// held reports whether a Retry-After still holds the endpoint back.
func (h *health) held(now time.Time) bool { return now.Before(h.holdUntil) }

// usable reports whether the endpoint takes ordinary requests now.
func (h *health) usable(now time.Time) bool { return !h.sick && !h.held(now) }

// describe says what the window holds: "20 of the last 20 attempts failed
// (http_500)", the causes by count, the most frequent first.
func (h *health) describe() string {
	counts := map[string]int{}
	var order []string
	for i := range h.n {
		c := h.ring[i]
		if c == "" {
			continue
		}
		if counts[c] == 0 {
			order = append(order, c)
		}
		counts[c]++
	}
	// By count, ties by first appearance in the ring.
	slices.SortStableFunc(order, func(a, b string) int { return counts[b] - counts[a] })
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = c
		if len(order) > 1 {
			parts[i] = fmt.Sprintf("%s %d", c, counts[c])
		}
	}
	return fmt.Sprintf("%d of the last %d attempts failed (%s)", h.fails, h.n, strings.Join(parts, ", "))
}

// replicaFault reports whether a failed attempt says something about the
// replica that answered it, not about the prompt: a 5xx, a 429 or 408, a
// connection that failed or a stream that was cut or stalled, a body that is
// not a chat completion, an answer from another model. A prompt too long for
// the context, another 4xx, a cancel or a request that could not be built are
// the prompt's or the run's, and say nothing of the replica.
func replicaFault(ce *wire.Error) bool {
	switch ce.Cause {
	case wire.CauseTooLong, wire.CauseCanceled, wire.CauseRequest, wire.CauseTLS, wire.CauseLength, wire.CauseBatch:
		return false
	}
	if ce.Status >= 400 && ce.Status < 500 {
		return ce.Status == 429 || ce.Status == 408
	}
	return true
}

// tried is the set of endpoints one prompt's attempts failed on since its
// last charged attempt: the next attempt goes elsewhere, uncharged, while
// there is an elsewhere.
type tried []bool

func (t tried) has(i int) bool { return t != nil && t[i] }
