package runstats

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
)

// ServerView is the servers' own figures as a run shows them: each
// endpoint's /metrics rates since its sample before, and their sum over
// the endpoints, each left out while measured from before the latest
// outage the run saw (a server that is gone, or the first window after
// it, measured across the restart). Update and the readers run on one
// goroutine, the reporter's.
type ServerView struct {
	eps []*serverEndpoint
	// told is the kinds whose missing figures were said (once a kind, not
	// once a replica).
	told map[promscrape.Kind]bool
	// toldPrefix: a prefix-cache figure that cannot be true was said (once a run).
	toldPrefix bool
	sum        *promscrape.Rates
	// sumFrom is when sum's window began: its earliest endpoint's.
	sumFrom    time.Time
	lastOutage time.Time
}

// serverEndpoint is one /metrics: its last sample and the rates since the
// one before.
type serverEndpoint struct {
	scrape func(context.Context) (promscrape.Sample, error)
	prev   *promscrape.Sample
	rates  *promscrape.Rates
	from   time.Time // when rates' window began
	health promscrape.Health
}

// NewServerView reads each of scrapes (one per endpoint, in base_url
// order); none: a view that is always empty.
func NewServerView(scrapes []func(context.Context) (promscrape.Sample, error)) *ServerView {
	v := &ServerView{told: make(map[promscrape.Kind]bool)}
	for _, f := range scrapes {
		v.eps = append(v.eps, &serverEndpoint{scrape: f})
	}
	return v
}

// Update takes one sample of each endpoint's metrics and the rates since
// the one before; the sum is of the endpoints whose scrape answered
// (Rates.Servers of Rates.Of). A failure is told to say once, and so is the recovery:
// the server's view is an extra, never a reason to stop. The first answer
// of a server whose kind does not report some figures (llama.cpp: no
// preemptions) says which, once for its kind.
func (v *ServerView) Update(ctx context.Context, say func(msg string)) {
	if len(v.eps) == 0 {
		return
	}
	var each []promscrape.Rates
	var from time.Time
	for _, ep := range v.eps {
		v.updateOne(ctx, ep, say)
		if ep.rates == nil {
			continue
		}
		each = append(each, *ep.rates)
		if from.IsZero() || ep.from.Before(from) {
			from = ep.from
		}
	}
	if len(each) == 0 {
		v.sum = nil
		return
	}
	sum := promscrape.Sum(each)
	if len(v.eps) > 1 {
		sum.Of = len(v.eps)
	}
	v.sum, v.sumFrom = &sum, from
}

// possessive is "vLLM's", "llama.cpp's", or "the server's" for a kind not
// known.
func possessive(k promscrape.Kind) string { return k.Name() + "'s" }

func (v *ServerView) updateOne(ctx context.Context, ep *serverEndpoint, say func(string)) {
	s, err := ep.scrape(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// A replica that does not answer is no part of the sum: its last
		// rates are of a server that may be gone.
		ep.rates = nil
		if ep.health.Failed() {
			say(fmt.Sprintf("metrics: %v; not showing the server's view (retrying quietly)", err))
		}
		return
	}
	if ep.health.Answered() {
		say(fmt.Sprintf("metrics: reachable again; showing %s view", possessive(s.Kind)))
	}
	if ep.prev == nil && s.Kind.Known() && !v.told[s.Kind] {
		v.told[s.Kind] = true
		if lacks := s.Lacks(); len(lacks) > 0 {
			say(fmt.Sprintf("metrics: %s's /metrics has no %s; the server's view shows what it reports",
				s.Kind.Name(), strings.Join(lacks, " nor ")))
		}
	}
	if ep.prev != nil && !s.At.After(ep.prev.At) {
		return // a shared scrape with no newer sample: the rates stand
	}
	if ep.prev != nil {
		rates := promscrape.Between(*ep.prev, s)
		ep.rates, ep.from = &rates, ep.prev.At
		if rates.PrefixUntrue != "" && !v.toldPrefix {
			v.toldPrefix = true
			say(fmt.Sprintf("metrics: %s cannot be true; the prefix-cache hit rate is not shown while it is so", rates.PrefixUntrue))
		}
	}
	ep.prev = &s
}

// At is the servers' summed rates to show with snap: nil before two
// samples, or while measured from before the latest outage (still going
// on, or over since).
func (v *ServerView) At(snap Snapshot) *promscrape.Rates {
	if snap.LastOutageSince.After(v.lastOutage) {
		v.lastOutage = snap.LastOutageSince
	}
	return v.Latest()
}

// Latest is At as of the last snapshot seen.
func (v *ServerView) Latest() *promscrape.Rates {
	if v.sum == nil || (!v.lastOutage.IsZero() && v.sumFrom.Before(v.lastOutage)) {
		return nil
	}
	return v.sum
}

// Each is each endpoint's own rates, for the record's endpoints (nil
// where not known); nil with one endpoint, whose rates are the sum.
func (v *ServerView) Each() []*promscrape.Rates {
	if len(v.eps) < 2 {
		return nil
	}
	out := make([]*promscrape.Rates, len(v.eps))
	for i, ep := range v.eps {
		if ep.rates != nil && (v.lastOutage.IsZero() || !ep.from.Before(v.lastOutage)) {
			out[i] = ep.rates
		}
	}
	return out
}

// Record is the progress record of snap with the servers' view: summed,
// and each endpoint's with several.
func (v *ServerView) Record(snap Snapshot) ProgressRecord {
	rec := NewProgressRecord(snap, v.At(snap))
	rec.SetEndpointServers(v.Each())
	return rec
}
