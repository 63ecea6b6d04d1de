package progress

// The terminal bar: progressbar/v3 draws the percentage and the bar, and
// barLine lays out as many of the line's fields as the terminal's width
// holds, by priority, never cutting one.

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/human"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// renderBar redraws the terminal bar in place with progressbar/v3: the
// fields that fit the terminal (barLine) as its description, then its
// percentage and bar.
func (r *Reporter) renderBar(snap runstats.Snapshot) {
	planned := snap.Planned()
	if planned <= 0 {
		return
	}
	width := terminalWidth(r.w)
	if width <= 0 {
		width = defaultBarWidth
	}
	if r.bar == nil {
		r.bar = progressbar.NewOptions64(planned,
			progressbar.OptionSetWriter(r.w),
			progressbar.OptionSetWidth(barCells),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionUseANSICodes(true),
			progressbar.OptionThrottle(0),
		)
	}
	if r.bar.GetMax64() != planned {
		r.bar.ChangeMax64(planned)
	}
	desc := barLine(snap, r.server.At(snap), r.draining(), width-barOverhead)
	if r.opts.Auto != nil {
		auto := AutoBar(r.opts.Auto())
		desc = barLine(snap, r.server.At(snap), r.draining(), width-barOverhead-utf8.RuneCountInString(auto)-1) + " " + auto
	}
	r.bar.Describe(desc)
	_ = r.bar.Set64(min(snap.Completed(), planned))
	r.barDrawn = true
}

// barOverhead is what progressbar/v3 draws beside the description: " 100% |",
// the bar's cells, "| " and a margin.
const barOverhead = barCells + 12

// defaultBarWidth is the width assumed when the terminal does not say.
const defaultBarWidth = 80

// barCells is the number of cells of the bar itself, between its brackets.
const barCells = 20

// A barField is one field of the terminal bar. prio orders what is kept
// when the terminal is narrow (0 first); the fields kept are shown in the
// order they were made.
type barField struct {
	prio  int
	texts []string // the field, then shorter forms of it
}

// barLine is the terminal bar's text at width columns (progressbar/v3 draws
// the percentage and the bar beside it): the fields that fit, most
// important first (done/total, the tok/s with its window, the ETA; then
// req/s, in flight, errors, ...), shown in their natural order. A field
// that does not fit is left out whole, never cut. The line is at most
// width-1 runes: a terminal may wrap a line that fills its last column.
func barLine(s runstats.Snapshot, server *promscrape.Rates, drain *drainState, width int) string {
	var fields []barField
	add := func(prio int, format string, args ...any) {
		fields = append(fields, barField{prio, []string{fmt.Sprintf(format, args...)}})
	}
	add(0, "%d/%d", s.Completed(), s.Planned())
	// The bar's rates are the last 10 s (the summary's are the whole
	// run's): the window is said, so they are not taken for each other.
	add(1, "10s %s tok/s", fmtTokShort(s.Last10s.TokPerSec))
	add(3, "%s req/s", fmtRate(s.Last10s.ReqPerSec))
	add(4, "%d in flight", s.InFlight)
	if s.Awaiting > 0 {
		add(6, "%d no byte yet", s.Awaiting)
	}
	if s.Errors > 0 {
		add(5, "%d err", s.Errors)
	}
	if s.Retries > 0 {
		add(9, "%d retries", s.Retries)
	}
	add(10, "avg %s tok", fmtAvg(s))
	if c := costText(s); c != "" {
		// The projection first to go: the cost so far says what was spent.
		texts := []string{c, human.Dollars(s.Cost)}
		fields = append(fields, barField{7, texts})
	}
	if drain != nil {
		// The job's ETA means nothing once no new request starts.
		fields = append(fields, barField{0, []string{drainText(s, drain),
			fmt.Sprintf("draining: %d, %s left", s.InFlight, human.Duration(drain.left(s.At)))}})
	} else {
		add(2, "eta %s", fmtETA(s))
	}
	if d := serverDown(s); d != "" {
		add(1, "%s", d)
	}
	if t := BatchText(s); t != "" {
		// In the batch mode the batches are where the answers are.
		add(2, "batches %s", t)
	}
	if eps := endpointsText(s); eps != "" {
		// A replica down is worth a place before the rates' details.
		prio := 8
		if s.EndpointsUp() < len(s.Endpoints) {
			prio = 2
		}
		fields = append(fields, barField{prio, []string{eps, fmt.Sprintf("eps %d/%d up", s.EndpointsUp(), len(s.Endpoints))}})
	}
	if server != nil {
		add(6, "| server %s tok/s", fmtTokShort(server.GenTokPerSec))
	}

	order := make([]int, len(fields))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return fields[a].prio - fields[b].prio })
	keep := make([]string, len(fields))
	used := -1 // no separator before the first field
	for _, i := range order {
		for _, text := range fields[i].texts {
			if n := utf8.RuneCountInString(text) + 1; used+n <= width-1 {
				keep[i] = text
				used += n
				break
			}
		}
	}
	var parts []string
	for _, text := range keep {
		if text != "" {
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, " ")
}

// fmtTokShort is a rate for the narrow bar: 950, 7.2k, 12.8k, 128k, 1.3M.
func fmtTokShort(v float64) string {
	switch {
	case v < 999.5:
		return fmt.Sprintf("%.0f", v)
	case v < 99950:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v < 999500:
		return fmt.Sprintf("%.0fk", v/1e3)
	default:
		return fmt.Sprintf("%.1fM", v/1e6)
	}
}

func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// isTerminal reports whether f is a terminal: only one gets the bar.
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
