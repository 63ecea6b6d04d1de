// Package progress renders runstats.Stats for a person: a progress bar on
// a terminal, one grep-friendly line per interval otherwise (nohup, a log
// file), or one JSON object per interval with --log-format json, and the
// summary when a run ends. It writes to the writer it is given.
package progress

// Rendering runstats.Stats for a person: a progress bar on a terminal, one
// grep-friendly line per interval otherwise (nohup, a log file), or one JSON
// object per interval with --log-format json.
//
// The plain line, field by field (every field is always present, so awk and
// grep can count on the layout; `grep progress` finds the lines, and awk's
// fields are one further than before the time led):
//
//	2026-11-30T13:45:07Z        when the line was taken, RFC 3339 in UTC
//	progress 150/25000          done/total keys, those of earlier runs included
//	(0.6%)                      done/total, cut to one decimal ("--" with no key)
//	(0 errors, 0 failed earlier) requests that gave up in this run; keys that
//	                            failed for good before it and are not asked
//	                            again (no --retry-errors): not done
//	0.9 req/s                   completed per second, this run
//	1598 tok/s                  completion tokens per second, this run, counted as they stream
//	avg completion 648 tok      mean length of the completed answers ("--" before the first)
//	in flight 200               requests in a slot now
//	eta 2h41m ±12m              from tokens (see runstats.Snapshot.ETA); ">2h41m" while no
//	                            answer has finished (a lower bound), "(low confidence)"
//	                            after it before 30 answers, "--" while unknown; after the
//	                            first Ctrl-C/SIGTERM "draining: 37 in flight, 1m12s of
//	                            grace left" instead
//	| 10s 1650 tok/s 1.0 req/s  the last 10 s
//	| 60s 1600 tok/s 0.9 req/s  the last 60 s
//	| retries 0                 attempts retried
//	| no byte yet 16            streams the server holds without a byte, not even
//	                            headers (queued in llama-server); only when some are
//	| paced 37 (requests)       requests waiting in their slot for their share of the
//	                            endpoints' rate limits (stated by a hosted server, or
//	                            endpoint.max_requests_per_minute / max_tokens_per_minute),
//	                            and the limit that binds: requests or tokens; only when some are
//	| batches 2 in_progress     with batch.enabled: the batches by state (the server's status
//	  (1,234/3,000), 1 collected  while it holds them), answered/requests where it says
//	| server 1700 tok/s ...     the server's own /metrics, when scraped: generation tok/s,
//	                            running, waiting, kv (cache usage), preemptions, spec decoding;
//	                            left out while measured from before the latest outage; with
//	                            replicas, the sum of those whose last scrape answered, and
//	                            "(2 of 3 replicas)" when one did not
//	| concurrency 98 (back off: ...) under concurrency: auto only: the limit in force and why it
//	                            last moved

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/human"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// barRefresh is how often the terminal bar is redrawn.
const barRefresh = 200 * time.Millisecond

// defaultInterval is the plain-line interval when none is configured.
const defaultInterval = 10 * time.Second

// reportInterval is the plain-line interval progress.interval gives.
func Interval(configured time.Duration) time.Duration {
	if configured <= 0 {
		return defaultInterval
	}
	return configured
}

type Options struct {
	TTY      bool          // draw a progress bar (the caller checked the file descriptor)
	Interval time.Duration // one line (or JSON object) per Interval; the server is scraped at this pace too
	Quiet    bool          // no progress output at all; Summary is its one line (and the errors' causes)
	JSON     bool          // --log-format json: one JSON object per Interval, even on a terminal
	// Scrape fetches the server's /metrics; nil: no server view.
	Scrape func(ctx context.Context) (promscrape.Sample, error)
	// ScrapeEach, with several endpoints, fetches each one's /metrics in
	// base_url order (Scrape is then unused): the server's view is their
	// sum, and each is kept for the record's endpoints.
	ScrapeEach []func(ctx context.Context) (promscrape.Sample, error)
	// Auto is concurrency: auto's limit and why it last moved, shown at
	// the end of the line and in the bar; nil under a fixed concurrency.
	Auto func() *autoconc.Record
	// Status receives the progress record (the object --log-format json
	// prints) each Interval and once more when Run ends (final), e.g. to
	// rewrite DIR/status.json. May be nil.
	Status func(rec runstats.ProgressRecord, final bool)
}

// Reporter renders the progress of one run. Run is its only goroutine; all
// its state is owned by it.
type Reporter struct {
	w    io.Writer
	opts Options

	// ticks makes the line interval; tests replace it to drive the Reporter
	// tick by tick.
	ticks func(time.Duration) (<-chan time.Time, func())

	server *runstats.ServerView // the servers' own /metrics

	barDrawn bool // the bar is on the terminal's current line
	bar      *progressbar.ProgressBar

	// drain is set by Draining, from the goroutine that handles the
	// first signal; Run reads it.
	drainMu sync.Mutex
	drain   *drainState
}

// drainState is the drain after the first signal: when it began, by the
// stats' clock, and how long the requests in flight may still take.
type drainState struct {
	since time.Time
	grace time.Duration
}

// Draining tells the Reporter that the run stopped taking new requests
// at since (by the stats' clock) and waits up to grace for those in
// flight: from then on the lines show the drain instead of the job's ETA.
func (r *Reporter) Draining(since time.Time, grace time.Duration) {
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	r.drain = &drainState{since: since, grace: grace}
}

func (r *Reporter) draining() *drainState {
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	return r.drain
}

// drainText says what the drain waits for and how long it may still wait:
// "draining: 37 in flight, 1m12s of grace left".
func drainText(s runstats.Snapshot, d *drainState) string {
	return fmt.Sprintf("draining: %d in flight, %s of grace left", s.InFlight, human.Duration(d.left(s.At)))
}

// left is what remains of the grace at at; 0 once it is over.
func (d *drainState) left(at time.Time) time.Duration { return max(d.grace-at.Sub(d.since), 0) }

func New(w io.Writer, opts Options) *Reporter {
	opts.Interval = Interval(opts.Interval)
	scrapes := opts.ScrapeEach
	if len(scrapes) == 0 && opts.Scrape != nil {
		scrapes = append(scrapes, opts.Scrape)
	}
	return &Reporter{w: w, opts: opts, ticks: realTicks, server: runstats.NewServerView(scrapes)}
}

func realTicks(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (r *Reporter) barMode() bool { return r.opts.TTY && !r.opts.JSON && !r.opts.Quiet }

// Run reports until ctx is done, then renders once more (the final state)
// and returns.
func (r *Reporter) Run(ctx context.Context, stats *runstats.Stats) {
	// The first sample is the baseline of the server's rates, so the first
	// line already shows the server's tok/s.
	r.server.Update(ctx, r.warn)
	lines, stop := r.ticks(r.opts.Interval)
	defer stop()
	var barTicks <-chan time.Time
	if r.barMode() {
		t := time.NewTicker(barRefresh)
		defer t.Stop()
		barTicks = t.C
		r.renderBar(stats.Snapshot())
	}
	for {
		select {
		case <-ctx.Done():
			r.report(stats.Snapshot(), true)
			return
		case <-barTicks:
			r.renderBar(stats.Snapshot())
		case <-lines:
			r.server.Update(ctx, r.warn)
			r.report(stats.Snapshot(), false)
		}
	}
}

// report writes the status record and, unless quiet, one line, JSON object
// or bar redraw.
func (r *Reporter) report(snap runstats.Snapshot, final bool) {
	rec := r.server.Record(snap)
	server := r.server.Latest()
	if r.opts.Status != nil {
		r.opts.Status(rec, final)
	}
	switch {
	case r.opts.Quiet:
	case r.opts.JSON:
		js, err := json.Marshal(rec)
		if err != nil {
			// Every field is a plain number or string; this is unreachable
			// short of a bug, and a progress line is not worth a crash.
			js = fmt.Appendf(nil, `{"event":"progress","error":%q}`, err.Error())
		}
		fmt.Fprintf(r.w, "%s\n", js)
	case r.barMode():
		r.renderBar(snap)
		if final {
			fmt.Fprintln(r.w)
			r.barDrawn = false
		}
	default:
		line := Line(snap, server, r.draining())
		if server != nil && rec.Server != nil && rec.Server.AgeS != nil {
			// The server block ends the line: its age follows it.
			line += fmt.Sprintf(" (%.0fs old)", *rec.Server.AgeS)
		}
		if server != nil {
			line += ReplicasText(r.server.Each()) // each replica's own, after the sum
		}
		if r.opts.Auto != nil {
			line += AutoText(r.opts.Auto())
		}
		fmt.Fprintln(r.w, line)
	}
}

// Server returns the server's rates as of the last scrape, nil when there
// were none or they began before the latest outage. Call it after Run has
// returned: Run owns them until then.
func (r *Reporter) Server() *promscrape.Rates { return r.server.Latest() }

// Record is the progress record of snap with the server's view: summed,
// and each endpoint's with several. Call it after Run has returned, as
// Server.
func (r *Reporter) Record(snap runstats.Snapshot) runstats.ProgressRecord {
	return r.server.Record(snap)
}

func (r *Reporter) warn(msg string) {
	switch {
	case r.opts.Quiet:
	case r.opts.JSON:
		b, _ := json.Marshal(struct {
			Event string `json:"event"`
			Msg   string `json:"msg"`
		}{"warning", msg})
		fmt.Fprintf(r.w, "%s\n", b)
	case r.barMode():
		if r.barDrawn {
			fmt.Fprint(r.w, "\r\x1b[K") // the bar is drawn again at its next refresh
		}
		fmt.Fprintln(r.w, msg)
	default:
		fmt.Fprintln(r.w, msg)
	}
}

// formatLine renders the plain progress line (see the top of this file).
func Line(s runstats.Snapshot, server *promscrape.Rates, drain *drainState) string {
	var b strings.Builder
	total := "?"
	if s.Planned() > 0 {
		total = fmt.Sprint(s.Planned())
	}
	eta := "eta " + fmtETA(s)
	if drain != nil {
		eta = drainText(s, drain)
	}
	fmt.Fprintf(&b, "%s progress %d/%s (%s) (%d errors, %d failed earlier) %s req/s %s tok/s avg completion %s tok in flight %d %s",
		s.At.UTC().Format(time.RFC3339), s.Completed(), total, Percent(s.Completed(), s.Planned()), s.Errors, s.AlreadyFailed, fmtRate(s.ReqPerSec), fmtTok(s.TokPerSec), fmtAvg(s), s.InFlight, eta)
	if s.SeveralTurns() {
		// req/s counts keys; with several turns a key the servers took
		// more requests: both, each named, this one in a block of its own
		// so that the fields before keep their places.
		fmt.Fprintf(&b, " | %s requests/s, every turn (req/s counts keys)", fmtRate(s.RequestsPerSec()))
	}
	fmt.Fprintf(&b, " | 10s %s tok/s %s req/s | 60s %s tok/s %s req/s | retries %d",
		fmtTok(s.Last10s.TokPerSec), fmtRate(s.Last10s.ReqPerSec),
		fmtTok(s.Last60s.TokPerSec), fmtRate(s.Last60s.ReqPerSec), s.Retries)
	if s.Awaiting > 0 {
		fmt.Fprintf(&b, " | no byte yet %d", s.Awaiting)
	}
	if n, by := s.Paced(); n > 0 {
		fmt.Fprintf(&b, " | paced %d (%s)", n, by)
	}
	if t := BatchText(s); t != "" {
		b.WriteString(" | batches ")
		b.WriteString(t)
	}
	if c := costText(s); c != "" {
		b.WriteString(" | cost ")
		b.WriteString(c)
	}
	if d := serverDown(s); d != "" {
		b.WriteString(" | ")
		b.WriteString(d)
	}
	if eps := endpointsText(s); eps != "" {
		b.WriteString(" | ")
		b.WriteString(eps)
	}
	if server != nil {
		b.WriteString(" | server ")
		b.WriteString(ServerText(*server))
		if est, ok := prefixHeldEst(s); ok && server.HasPrefix {
			fmt.Fprintf(&b, " (client est. %.0f%%)", 100*est)
		}
	}
	return b.String()
}

// ReplicasText is each replica's prefix-cache hit rate and preemptions,
// in base_url order, after the summed server figures: " | replicas hits
// 81/80/90% preemptions 0/2/0"; "-" for a replica that does not report
// one (or did not answer its last scrape); "" with one endpoint or when no
// replica reports either.
func ReplicasText(each []*promscrape.Rates) string {
	if len(each) < 2 {
		return ""
	}
	hits, pre := make([]string, len(each)), make([]string, len(each))
	anyHits, anyPre := false, false
	for i, r := range each {
		hits[i], pre[i] = "-", "-"
		if r == nil {
			continue
		}
		if r.HasPrefix {
			hits[i], anyHits = fmt.Sprintf("%.0f", 100*r.PrefixHitRate), true
		}
		if r.HasPreemptions {
			pre[i], anyPre = fmt.Sprintf("%.0f", r.Preemptions), true
		}
	}
	var b strings.Builder
	if anyHits {
		b.WriteString(" hits " + strings.Join(hits, "/") + "%")
	}
	if anyPre {
		b.WriteString(" preemptions " + strings.Join(pre, "/"))
	}
	if b.Len() == 0 {
		return ""
	}
	return " | replicas" + b.String()
}

// prefixHeldEst is the client's estimate of the share of the prompt tokens
// its placement by prefix sent where their leading messages had gone
// before (runstats.Endpoint.AddPlaced), over every endpoint; false before
// an answer so placed.
func prefixHeldEst(s runstats.Snapshot) (float64, bool) {
	var prompt, held int64
	for _, e := range s.Endpoints {
		prompt += e.PlacedPrompt
		held += e.PlacedHeld
	}
	if prompt == 0 {
		return 0, false
	}
	return float64(held) / float64(prompt), true
}

// formatServer renders the server's view: generation tok/s first, after
// the server's name when it is SGLang or llama.cpp (vLLM's line is as it
// always was), and only the figures the server reports.
func ServerText(r promscrape.Rates) string {
	var b strings.Builder
	if r.Kind == promscrape.KindSGLang || r.Kind == promscrape.KindLlamaCpp {
		b.WriteString(r.Kind.Name() + " ")
	}
	fmt.Fprintf(&b, "%s tok/s running %.0f waiting %.0f", fmtTok(r.GenTokPerSec), r.Running, r.Waiting)
	if r.HasKV {
		fmt.Fprintf(&b, " kv %.0f%%", 100*r.KVCacheUsage)
	}
	if r.HasPreemptions {
		fmt.Fprintf(&b, " preemptions %.0f", r.Preemptions)
	}
	if r.HasPrefix {
		fmt.Fprintf(&b, " prefix hits %.0f%%", 100*r.PrefixHitRate)
	}
	if r.HasSpec {
		fmt.Fprintf(&b, " spec acceptance %.0f%% length %.2f", 100*r.AcceptanceRate, r.MeanAcceptanceLength)
	}
	if r.Of > 1 && r.Servers < r.Of {
		fmt.Fprintf(&b, " (%d of %d replicas)", r.Servers, r.Of)
	}
	return b.String()
}

// serverDown says, while the server refuses connections, since when; every
// slot is waiting for it then and no prompt is charged an attempt.
func serverDown(s runstats.Snapshot) string {
	if s.ServerDownSince.IsZero() {
		return ""
	}
	return "server unreachable for " + human.Duration(s.At.Sub(s.ServerDownSince)) + ", waiting for it"
}

// endpointsText is the endpoints' state with several (endpoint.base_url a
// list): "eps 3/3 up", or "eps 2/3 up, down: http://c:8000/v1 12s (20 of the
// last 20 attempts failed (http_500))" naming each replica that is out, for
// how long and why. "" with one endpoint.
func endpointsText(s runstats.Snapshot) string {
	if len(s.Endpoints) < 2 {
		return ""
	}
	text := fmt.Sprintf("eps %d/%d up", s.EndpointsUp(), len(s.Endpoints))
	var down []string
	for _, e := range s.Endpoints {
		if e.State == runstats.EndpointUp {
			continue
		}
		d := e.URL
		if !e.DownSince.IsZero() {
			d += " " + human.Duration(s.At.Sub(e.DownSince))
		}
		if e.Reason != "" {
			d += " (" + clip(e.Reason, 120) + ")"
		}
		down = append(down, d)
	}
	if len(down) > 0 {
		text += ", down: " + strings.Join(down, ", ")
	}
	return text
}

// clip cuts s to at most n runes, marking the cut with "...".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

func fmtTok(v float64) string { return fmt.Sprintf("%.0f", v) }

// fmtRate keeps slow rates readable: 0.04 req/s is not 0.0.
func fmtRate(v float64) string {
	if v == 0 || v >= 0.1 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func fmtAvg(s runstats.Snapshot) string {
	if s.Done == 0 {
		return "--"
	}
	return fmt.Sprintf("%.0f", s.CompletionAvg)
}

func fmtETA(s runstats.Snapshot) string {
	switch {
	case s.ETAUnknown != "":
		return "-- (" + s.ETAUnknown + ")"
	case !s.ETAKnown:
		return "--"
	case s.Done == 0 && s.ETA > 0:
		// No answer has finished: the length estimate is the longest
		// answer so far, so the ETA is a lower bound.
		return ">" + human.Duration(s.ETA)
	}
	out := human.Duration(s.ETA)
	if s.ETAError > 0 {
		out += " ±" + human.Duration(s.ETAError)
	}
	if s.Confidence == "low" && s.ETA > 0 {
		out += " (low confidence)"
	}
	return out
}

// Summary is the small table printed when a run ends. Its first word is
// the outcome (outcomeWord): done, incomplete, interrupted or failed.
func (r *Reporter) Summary(stats *runstats.Stats, outcome string) string {
	s := stats.Snapshot()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d/%d in %s", outcome, s.Completed(), s.Planned(), human.Duration(s.Elapsed))
	if s.AlreadyDone > 0 {
		fmt.Fprintf(&b, " (%d before this run)", s.AlreadyDone)
	}
	if s.AlreadyFailed > 0 {
		fmt.Fprintf(&b, ", %d failed in earlier runs (not asked without --retry-errors)", s.AlreadyFailed)
	}
	if s.BadRows > 0 {
		// Out of the count above: rows that make no prompt (each said with
		// its file and line), a repeated id among them.
		fmt.Fprintf(&b, ", %d bad %s skipped", s.BadRows, map[bool]string{true: "row", false: "rows"}[s.BadRows == 1])
	}
	fmt.Fprintf(&b, ", %d errors, %d retries\n", s.Errors, s.Retries)
	if s.Done == 0 && s.Errors == 0 {
		return b.String() // nothing was asked: a table of zeros says nothing
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if len(s.ErrorsByCause) > 0 {
		fmt.Fprintf(tw, "  errors\t%s\n", human.Counts(s.ErrorsByCause))
	}
	if n := s.ErrorsByCause[wire.CauseTooLong]; n > 0 {
		// Under the errors it explains: no retry makes these fit.
		fmt.Fprintf(tw, "  \t%s\n", TooLongLine(n, s.MaxModelLen))
	}
	if r.opts.Quiet {
		// --quiet: the one line, and what failed; the figures are in
		// report.json.
		_ = tw.Flush()
		return b.String()
	}
	if len(s.RetriesByCause) > 0 {
		fmt.Fprintf(tw, "  retries\t%s\n", human.Counts(s.RetriesByCause))
		// What each cause was, the last time: "connection" alone does not
		// say whether the server refused, reset or closed a connection.
		for _, cause := range slices.Sorted(maps.Keys(s.RetryLast)) {
			fmt.Fprintf(tw, "  \tlast %s: %s\n", cause, clip(s.RetryLast[cause], 160))
		}
	}
	fmt.Fprintf(tw, "  throughput\t%s req/s\t%s tok/s\t%s prompt tok/s\n",
		fmtRate(s.ReqPerSec), fmtTok(s.TokPerSec), fmtTok(s.PromptTokPerSec))
	fmt.Fprintf(tw, "  completion\tavg %s\tp50 %d\tp90 %d\tmax %d tok\ttruncated %.1f%%\n",
		fmtAvg(s), s.CompletionP50, s.CompletionP90, s.CompletionMax, 100*s.TruncatedShare)
	if s.Priced {
		fmt.Fprintf(tw, "  cost\t%s\t%s an answer", human.Dollars(s.Cost), human.Dollars(s.Cost/float64(max(s.Done, 1))))
		if billedApart(s) {
			fmt.Fprintf(tw, "\t%s billed (answers not kept too)", human.Dollars(s.Billed))
		}
		fmt.Fprintln(tw)
	}
	if s.TTFTP50 > 0 {
		fmt.Fprintf(tw, "  latency\tttft p50 %s\tp90 %s\titl p50 %s\tp90 %s\n",
			fmtLatency(s.TTFTP50), fmtLatency(s.TTFTP90), fmtLatency(s.ITLP50), fmtLatency(s.ITLP90))
	}
	_ = tw.Flush()
	return b.String()
}

// tooLongLine says how many prompts can never be answered by this model,
// and its context when the server listed it.
func TooLongLine(n, maxModelLen int64) string {
	what := "prompts"
	if n == 1 {
		what = "prompt"
	}
	if maxModelLen > 0 {
		return fmt.Sprintf("%d %s too long for the model's context (max_model_len %d)", n, what, maxModelLen)
	}
	return fmt.Sprintf("%d %s too long for the model's context", n, what)
}

func fmtLatency(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	default:
		// A fast local server: 0s would read as "not measured".
		return d.Round(time.Microsecond).String()
	}
}

// fmtPercent is the share of the job done, cut (never rounded up) to one
// decimal, so that 100.0% means every key is done; "--" for a job of no key.
func Percent(done, planned int64) string {
	if planned <= 0 {
		return "--"
	}
	tenths := 1000 * done / planned
	return fmt.Sprintf("%d.%d%%", tenths/10, tenths%10)
}

// BatchText is the batch mode's batches by state, "2 in_progress
// (1,234/3,000), 1 collected"; "" without batches.
func BatchText(s runstats.Snapshot) string {
	var parts []string
	for _, c := range s.BatchStates() {
		t := fmt.Sprintf("%d %s", c.Batches, c.State)
		if c.Completed > 0 && c.Completed < c.Requests {
			t += fmt.Sprintf(" (%s/%s)", human.Num(int64(c.Completed)), human.Num(int64(c.Requests)))
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, ", ")
}
