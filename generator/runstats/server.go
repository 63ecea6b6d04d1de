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
	// sumFrom is when sum's window began: its earliest endpoint's; sumTo
	// when it ended, its latest sample's. shownTo is the sumTo of the
	// figures the last record showed: the same again are not fresh.
	sumFrom, sumTo, shownTo time.Time
	lastOutage              time.Time
	// answered is set once a snapshot has an answer done (At): a fresh
	// server shows its token and preemption counters only after its first
	// request finishes, so what a sample lacks is said only from then.
	answered bool
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
// the server's view is an extra, never a reason to stop. The first sample
// taken after the run had an answer (At saw one) says which figures a
// server's kind does not report (llama.cpp: no preemptions), once for its
// kind: before, a fresh server lacks counters it makes at its first
// answer.
func (v *ServerView) Update(ctx context.Context, say func(msg string)) {
	if len(v.eps) == 0 {
		return
	}
	var each []promscrape.Rates
	var from, to time.Time
	for _, ep := range v.eps {
		v.updateOne(ctx, ep, say)
		if ep.rates == nil {
			continue
		}
		each = append(each, *ep.rates)
		if from.IsZero() || ep.from.Before(from) {
			from = ep.from
		}
		if ep.prev.At.After(to) {
			to = ep.prev.At
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
	v.sum, v.sumFrom, v.sumTo = &sum, from, to
}

// Shown says the figures a record at now shows were shown before: no
// sample came since the last record (a scrape shared with another reader
// for half an interval, a tick late on a loaded machine, or the final
// record after the last tick), and how old they are, measured from the
// sample they end at. Call it once a record, as Record does.
func (v *ServerView) Shown(now time.Time) (age time.Duration, old bool) {
	if v.Latest() == nil {
		return 0, false
	}
	old = !v.sumTo.After(v.shownTo)
	v.shownTo = v.sumTo
	return max(now.Sub(v.sumTo), 0), old
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
	if v.answered && s.Kind.Known() && !v.told[s.Kind] {
		v.told[s.Kind] = true
		if lacks := s.Lacks(); len(lacks) > 0 {
			say(fmt.Sprintf("metrics: %s's /metrics has no %s; the server's view shows what it reports",
				s.Kind.Name(), strings.Join(lacks, " nor ")))
		}
	}
	if ep.prev != nil && !s.At.After(ep.prev.At) {
		// A shared scrape with no newer sample: the rates stand, and the
		// record that shows them again says their age (Shown).
		return
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
	if snap.Done > 0 {
		v.answered = true
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
// and each endpoint's with several; the summed figures carry their age
// when the record before showed them already (Shown).
func (v *ServerView) Record(snap Snapshot) ProgressRecord {
	rec := NewProgressRecord(snap, v.At(snap))
	rec.SetEndpointServers(v.Each())
	if age, old := v.Shown(snap.At); old && rec.Server != nil {
		rec.Server.AgeS = finite(age.Seconds())
	}
	return rec
}
