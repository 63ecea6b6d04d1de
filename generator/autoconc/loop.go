package autoconc

// The loop of concurrency: auto: every interval it scrapes each endpoint's
// /metrics, hands the sample with the client's own counts there (in
// flight, tokens received, answers completed) to that endpoint's
// Controller, and sets the run's limit to what they answer (their sum,
// with several endpoints). Each move is one line on the log
// ("concurrency 24 -> 36 at 4.1s: grow: ..."); each server figure a
// controller ignores (it cannot be) is a warning, once per endpoint and
// metric.
//
// An endpoint whose server serves no /metrics to steer by (a 4xx or 501,
// no Prometheus text, no vLLM queue gauge: a hosted API, a proxy) is
// steered by its answers instead (replies.go), as Prepare says once. The
// server's token counter is not needed: throughput is the client's own
// count. A run whose metrics cannot be read at all at start (the server
// away) is refused before its first request. Metrics that go away in the
// middle of a run (a restart) hold that endpoint's limit where it is
// until they are back.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// Required are the server metrics a Controller cannot do without: the
// queue. Throughput is the client's own count (ClientView).
var Required = []string{promscrape.MetricWaiting}

// Endpoint is one metrics source of the run.
type Endpoint struct {
	URL    string                                           // for messages, its password masked
	Scrape func(context.Context) (promscrape.Sample, error) // nil: no /metrics URL, steered by its answers
}

// Target is what the loop steers: the run's limit. *generator.Runner is one.
type Target interface {
	Limit() int
	// SetLimit sets the limit, records why and returns the limit in force.
	SetLimit(limit int, reason string, at time.Time) int
}

// LoopOptions configure a Loop.
type LoopOptions struct {
	Ceiling int           // the most in flight (concurrency's ceiling)
	Every   time.Duration // how often to look; 0: DefaultInterval
	Target  Target
	// Client is the client's own counts now; required.
	Client func() ClientView
	// TokensAtEnd: the client learns an answer's tokens only when it ends
	// (the run does not stream); see Options.TokensAtEnd.
	TokensAtEnd bool
	// Now is the clock of the loop: when the client's counts are taken,
	// when the limit moved and the run's elapsed time in the move lines;
	// nil: time.Now. (A test steps the loop with Step on a clock of its own.)
	Now func() time.Time
	// OnWarning, when set, is also handed each warning (status.json's
	// warnings), without the "warning: " prefix and the newline.
	OnWarning func(string)
	// SetEndpointLimit, when set, is told each endpoint's limit (several
	// endpoints: the router prefers the most headroom under it).
	SetEndpointLimit func(i, limit int)
	Log              io.Writer // the move lines; nil: discarded
	Warn             io.Writer // warnings, shown even when Log is not; nil: Log
}

// ClientView is what the client counted: the run's requests in flight
// and, in the order of the endpoints, each one's.
type ClientView struct {
	InFlight  int
	Endpoints []EndpointView // may be shorter than the endpoints when not known: counts of 0
}

// EndpointView is the client's own counts of one endpoint.
type EndpointView struct {
	InFlight int     // requests in flight to it now
	Tokens   int64   // tokens received from it so far: every streamed delta, or, with TokensAtEnd, each answer's at its end
	Answers  int64   // answers it completed so far
	Replies  Replies // what its answers said (steering without /metrics)
}

// RefusedError is a run that concurrency: auto cannot steer; Hint says
// what to do instead.
type RefusedError struct {
	Err  error
	Hint string
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Loop steers one run's limit.
type Loop struct {
	o         LoopOptions
	endpoints []*endpoint
	started   time.Time
}

// endpoint is one metrics source and its controller.
type endpoint struct {
	Endpoint
	ctrl     *Controller
	health   promscrape.Health // the last scrape failed: said once
	warned   map[string]bool   // metrics whose impossible values were said
	steering string            // by replies: why, as said at start; "": by its /metrics
}

// Prepare scrapes every endpoint once and builds the loop: an endpoint
// that serves nothing to steer by (noMetrics) is steered by its answers,
// as a line on Log says once (and Steering); a run where none answers
// is refused; one that does not answer while others do starts at the
// first limit and its controller waits for its metrics (a warning on Log
// says so). It sets the target's first limit, and says where it starts.
func Prepare(ctx context.Context, eps []Endpoint, o LoopOptions) (*Loop, error) {
	if o.Every <= 0 {
		o.Every = DefaultInterval
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Warn == nil {
		o.Warn = o.Log
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	hint := "set concurrency to a number (e.g. 64), or endpoint.metrics_url to where the server serves vLLM's /metrics"
	l := &Loop{o: o, started: o.Now()}
	start := StartLimit(o.Ceiling)
	var down []string
	view, at := o.Client(), o.Now()
	for i, e := range eps {
		ep := &endpoint{Endpoint: e}
		l.endpoints = append(l.endpoints, ep)
		// first is why the metrics cannot steer; err, why they cannot be read.
		first, err := errNoURL, error(nil)
		var smp promscrape.Sample
		if e.Scrape != nil {
			if smp, err = promscrape.Persist(ctx, e.Scrape); err == nil {
				first = missingRequired(smp)
			} else {
				first = err
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		opts := Options{Ceiling: o.Ceiling, Start: start, TokensAtEnd: o.TokensAtEnd}
		if why, ok := noMetrics(ep.URL, first); ok {
			opts.ByReplies = true
			ep.steering = why + ": steering by 429s and latency, ceiling " + fmt.Sprint(o.Ceiling)
		}
		ep.ctrl = New(opts)
		switch {
		case opts.ByReplies:
			l.observe(i, ep, promscrape.Sample{}, view, at)
		case err != nil:
			ep.health.Failed()
			down = append(down, fmt.Sprintf("%s (%v)", ep.URL, err))
		default:
			l.observe(i, ep, smp, view, at) // the baseline of the rates
		}
	}
	if len(eps) == 0 {
		return nil, &RefusedError{Hint: hint, Err: errors.New("concurrency: auto needs at least one /metrics URL")}
	}
	if len(down) == len(eps) {
		return nil, &RefusedError{Hint: hint, Err: fmt.Errorf("concurrency: auto steers by the server's vLLM metrics, which cannot be read: %s", strings.Join(down, "; "))}
	}
	for _, d := range down {
		fmt.Fprintf(o.Warn, "warning: concurrency: auto cannot read %s yet; that endpoint holds its first limit until it can\n", d)
	}
	urls := make([]string, len(l.endpoints))
	for i, ep := range l.endpoints {
		urls[i] = ep.URL
		if l.several() && o.SetEndpointLimit != nil {
			o.SetEndpointLimit(i, ep.ctrl.Limit())
		}
	}
	if l.several() {
		o.Target.SetLimit(min(len(eps)*start, o.Ceiling), fmt.Sprintf("start: %d per endpoint", start), o.Now())
	}
	fmt.Fprintf(o.Log, "concurrency: auto, starting at %d, up to %d, from %s every %s\n", o.Target.Limit(), o.Ceiling, strings.Join(urls, ", "), o.Every)
	if s := l.Steering(); s != "" {
		fmt.Fprintf(o.Log, "concurrency: auto: %s\n", s)
	}
	return l, nil
}

// Steering says which endpoints are steered by their answers and why
// ("no /metrics at URL (404 Not Found): steering by 429s and latency,
// ceiling 512"); "" when every one is steered by its /metrics.
func (l *Loop) Steering() string {
	var out []string
	for _, ep := range l.endpoints {
		if ep.steering != "" {
			out = append(out, ep.steering)
		}
	}
	return strings.Join(out, "; ")
}

// errNoURL is an endpoint given no /metrics URL (Endpoint.Scrape nil).
var errNoURL = errors.New("no /metrics URL")

// missingError is a sample without some of the Required metrics.
type missingError struct{ names []string }

func (e *missingError) Error() string { return "no " + strings.Join(e.names, " nor ") }

// missingRequired is the Required metrics a sample lacks; nil when it has
// them.
func missingRequired(s promscrape.Sample) error {
	e := &missingError{}
	for _, m := range Required {
		if !s.Found[m] {
			e.names = append(e.names, m)
		}
	}
	if len(e.names) == 0 {
		return nil
	}
	return e
}

// noMetrics says why an endpoint's first scrape, which failed with err,
// shows it serves nothing to steer by (it has no /metrics: a 4xx, a 501,
// no Prometheus text, none of the Required metrics), and whether it does;
// an error that may pass (the server away, a 5xx, a timeout) does not.
func noMetrics(url string, err error) (string, bool) {
	var st *promscrape.StatusError
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, errNoURL):
		return "no /metrics URL for " + url, true
	case errors.As(err, &st) && (st.Status == 501 || st.Status >= 400 && st.Status < 500 && st.Status != 408 && st.Status != 429):
		return fmt.Sprintf("no /metrics at %s (%s)", url, st.Text), true
	case errors.As(err, new(expfmt.ParseError)), errors.Is(err, promscrape.ErrNoServerMetrics):
		return fmt.Sprintf("no server metrics at %s (not vLLM's Prometheus text)", url), true
	case errors.As(err, new(*missingError)):
		return fmt.Sprintf("%s at %s", err, url), true
	}
	return "", false
}

func (l *Loop) several() bool { return len(l.endpoints) > 1 }

// Run looks at the endpoints every interval until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	t := time.NewTicker(l.o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.Step(ctx)
	}
}

// Step looks at every endpoint once, sets each one's limit (with several)
// and the run's: their sum.
func (l *Loop) Step(ctx context.Context) {
	view, at := l.o.Client(), l.o.Now()
	var reasons []string
	moved := false
	limit := 0
	for i, ep := range l.endpoints {
		var s promscrape.Sample
		var err error
		if !ep.ctrl.o.ByReplies {
			s, err = ep.Scrape(ctx)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if ep.health.Failed() {
				fmt.Fprintf(l.o.Log, "concurrency: auto cannot read %s (%v); holding at %d until it can\n", ep.URL, err, ep.ctrl.Limit())
			}
		default:
			if ep.health.Answered() {
				fmt.Fprintf(l.o.Log, "concurrency: auto reads %s again\n", ep.URL)
			}
			d := l.observe(i, ep, s, view, at)
			if d.Moved {
				moved = true
				why := d.Reason
				if l.several() {
					why = ep.URL + ": " + why
					if l.o.SetEndpointLimit != nil {
						l.o.SetEndpointLimit(i, ep.ctrl.Limit())
					}
				}
				reasons = append(reasons, why)
			}
		}
		limit += ep.ctrl.Limit()
	}
	if !moved {
		return
	}
	from := l.o.Target.Limit()
	why := strings.Join(reasons, "; ")
	now := l.o.Now()
	to := l.o.Target.SetLimit(limit, why, now)
	fmt.Fprintf(l.o.Log, "concurrency %d -> %d at %s: %s\n", from, to, now.Sub(l.started).Round(100*time.Millisecond), why)
}

// observe hands endpoint i's controller its sample and the client's counts
// there, taken at at, and warns of each metric it ignores, once.
func (l *Loop) observe(i int, ep *endpoint, s promscrape.Sample, view ClientView, at time.Time) Decision {
	var counts EndpointView
	if i < len(view.Endpoints) {
		counts = view.Endpoints[i]
	}
	// One endpoint: all in flight are its own; with several, the
	// router's count for it.
	inFlight := view.InFlight
	if l.several() {
		inFlight = counts.InFlight
	}
	d := ep.ctrl.Observe(Reading{At: at, Server: s, InFlight: inFlight,
		Tokens: float64(counts.Tokens), Answers: float64(counts.Answers), Replies: counts.Replies})
	for _, ig := range d.Ignored {
		if ep.warned[ig.Metric] {
			continue
		}
		if ep.warned == nil {
			ep.warned = make(map[string]bool)
		}
		ep.warned[ig.Metric] = true
		msg := fmt.Sprintf("concurrency: auto ignores %s = %g from %s: %s; such values do not steer the limit (said once)", ig.Metric, ig.Value, ep.URL, ig.Why)
		fmt.Fprintf(l.o.Warn, "warning: %s\n", msg)
		if l.o.OnWarning != nil {
			l.o.OnWarning(msg)
		}
	}
	return d
}
