package view

// The view read as a person reads it, in a real browser (issue 28): what
// the run page says agrees with the CLI, and the records table can be
// skimmed.

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/chromedp"

	"github.com/synthgen/synthgen/sink"
)

// The record of the resume: its reasoning is shorter in characters than
// in bytes.
const (
	multibyteID        = "café"
	multibyteReasoning = "naïve café — ☕ is 14 characters… and more"
)

// resumedViewDir is makeViewDir's directory after a kill -9 and a resume:
// run 1 never ended (its manifest entry says so), run 2 wrote a key that
// failed its schema (no HTTP status) and a record of multibyte text.
func resumedViewDir(t *testing.T) *viewDir {
	t.Helper()
	v := makeViewDir(t, sink.FormatJSONL)
	s, err := sink.Open(sink.Options{Dir: v.dir, Format: sink.FormatJSONL, PartSize: 20, Job: fixtureJob(t), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteError(&sink.ErrorRecord{ID: "schema-key", Status: 0, Message: "content is not valid JSON", Attempts: 3, Cause: "schema",
		CreatedAt: time.Date(2025, 6, 1, 13, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	r := fixtureRecord(1000)
	r.ID, r.Reasoning = multibyteID, multibyteReasoning
	if err := s.Write(&r); err != nil {
		t.Fatal(err)
	}
	s.SetOutcome("done")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Run 1 was killed: it never wrote its end.
	path := filepath.Join(v.dir, sink.ManifestName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	runs := m["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("%d runs in the manifest", len(runs))
	}
	run1 := runs[0].(map[string]any)
	run1["ended_at"], run1["outcome"] = nil, nil
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return v
}

// timePlots are the run page's plots of a directory's history.
var timePlots = []string{"d0-tok", "d0-req", "d0-inflight", "d0-queue", "d0-kv", "d0-errors", "d0-endpoints"}

// checkRunMarks: on every time plot each run's label is drawn inside its
// own run's span (where it was drawn, by the alignment it was drawn with),
// both runs are labelled, and no two series share a colour.
func checkRunMarks(t *testing.T, b *browser) {
	t.Helper()
	type plot struct {
		Series  []string `json:"series"`
		Strokes []string `json:"strokes"`
		Labels  []struct {
			Run      int     `json:"run"`
			Text     string  `json:"text"`
			Left     float64 `json:"left"`
			Right    float64 `json:"right"`
			SegLeft  float64 `json:"seg_left"`
			SegRight float64 `json:"seg_right"`
		} `json:"labels"`
	}
	plots := eval[map[string]plot](b, `window.synthgenPlots`)
	for _, id := range timePlots {
		p, ok := plots[id]
		if !ok {
			continue // a plot without values is not drawn
		}
		runs := map[int]bool{}
		for _, l := range p.Labels {
			runs[l.Run] = true
			if l.Left < l.SegLeft || l.Right > l.SegRight {
				t.Errorf("plot %s: the label %q spans %.0f..%.0f px, its run %.0f..%.0f: over another run", id, l.Text, l.Left, l.Right, l.SegLeft, l.SegRight)
			}
		}
		if !runs[1] || !runs[2] {
			t.Errorf("plot %s: labels %+v, want both runs'", id, p.Labels)
		}
		seen := map[string]string{}
		for i, c := range p.Strokes {
			if other, ok := seen[c]; ok {
				t.Errorf("plot %s: %q and %q share the colour %s", id, other, p.Series[i], c)
			}
			seen[c] = p.Series[i]
		}
	}
}

// isoUTC is a time as the CLI prints one.
var isoUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$`)

// TestViewBrowserRunPageReadsAsTheCLI: on the run page each run's label
// is inside its own run's span, every series of a plot has its own
// colour, times read in UTC as the CLI prints them (the runs, auto's
// moves, the plots' legend), the killed run says killed, and a count
// axis ends near its highest count.
func TestViewBrowserRunPageReadsAsTheCLI(t *testing.T) {
	b := newBrowser(t)
	v := resumedViewDir(t)
	_, ts := serve(t, Options{Dirs: []string{v.dir}})
	b.open(ts.URL+"/", true)
	b.screenshot("run-resumed.png")
	b.do(chromedp.ScrollIntoView(chromedp.CSS(`#d0-inflight`)))
	shot, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(`#d0-inflight`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "inflight.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	checkRunMarks(t, b)
	type plot struct {
		Total int     `json:"total"`
		High  float64 `json:"high"`
		YMax  float64 `json:"ymax"`
	}
	plots := eval[map[string]plot](b, `window.synthgenPlots`)
	if note := eval[string](b, `document.querySelector("#d0-req .legendnote.runs").textContent`); !strings.Contains(note, "run 2 from 2025-06-01 12:04:20Z, resumed (90 done)") {
		t.Errorf("the runs under a plot: %q", note)
	}

	// The legend, with the cursor on the in-flight plot.
	legend := eval[string](b, `(() => {
		const over = document.querySelector("#d0-inflight .u-over"), r = over.getBoundingClientRect();
		over.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + r.width / 4, clientY: r.top + r.height / 2, bubbles: true}));
		return document.querySelector("#d0-inflight .u-legend .u-series:first-child .u-value").textContent;
	})()`)
	if !isoUTC.MatchString(legend) {
		t.Errorf("the legend's time reads %q, want UTC as the CLI prints it", legend)
	}
	for _, d := range eval[[]string](b, `[...document.querySelectorAll("#d0-inflight table.moves td:first-child")].map(td => td.textContent)`) {
		if !isoUTC.MatchString(d) {
			t.Errorf("auto's move at %q, want UTC as the CLI prints it", d)
		}
	}
	runs := eval[[][]string](b, `[...document.querySelectorAll("#dir-0 table.runs tr")].slice(1).map(tr => [...tr.cells].map(c => c.textContent))`)
	if len(runs) != 2 || runs[0][3] != "killed" || runs[1][3] != "done" {
		t.Errorf("the runs table %q: run 1 killed, run 2 done", runs)
	}
	for _, r := range runs {
		for _, d := range r[1:3] {
			if d != "-" && !isoUTC.MatchString(d) {
				t.Errorf("the runs table says %q, want UTC as the CLI prints it", d)
			}
		}
	}

	for _, id := range []string{"finish", "completion", "reasoning", "latency"} {
		if p := plots[id]; p.High <= 0 || p.YMax < p.High || p.YMax > 1.25*p.High {
			t.Errorf("plot %s: the count axis runs to %v, the highest count is %v", id, p.YMax, p.High)
		}
	}
	b.quiet()

	// One finish reason only: its axis ends near its count, not twice it.
	one := t.TempDir()
	s, err := sink.Open(sink.Options{Dir: one, Format: sink.FormatJSONL, PartSize: 20, Job: fixtureJob(t), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		r := fixtureRecord(1 + 10*i) // not a multiple of 5: finish stop
		if err := s.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, ts1 := serve(t, Options{Dirs: []string{one}})
	b.open(ts1.URL+"/", true)
	if p := eval[map[string]plot](b, `window.synthgenPlots`)["finish"]; p.Total != 5 || p.High != 5 || p.YMax > 6.25 {
		t.Errorf("one finish reason, 5 records: the axis runs to %v", p.YMax)
	}
	b.quiet()
}

// TestViewBrowserRecordsTable: the table shows a few words of each
// record's prompt and answer (as text); a row's link opens the record of
// that id and sample, and /record/ID is the record of that id, not a
// position; the table and the record page count a text in the same unit;
// a failure without an HTTP status does not say status 0.
func TestViewBrowserRecordsTable(t *testing.T) {
	b := newBrowser(t)
	v := resumedViewDir(t)
	s, ts := serve(t, Options{Dirs: []string{v.dir}})
	if err := s.Index().Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.open(ts.URL+"/records?per=20", false)
	b.screenshot("records.png")
	b.open(ts.URL+"/records?per=500", false)
	type row struct {
		ID, Sample, Prompt, Answer, Href, RChars string
	}
	rows := eval[[]row](b, `[...document.querySelectorAll("#records tbody tr")].map(tr => ({
		ID: tr.querySelector("td.id").textContent, Sample: tr.cells[1].textContent,
		Prompt: tr.querySelector("td.prompt").textContent, Answer: tr.querySelector("td.answer").textContent,
		Href: tr.querySelector("td.id a").getAttribute("href"), RChars: tr.cells[7].textContent}))`)
	if len(rows) != len(v.records)+1 {
		t.Errorf("%d rows, want the %d records", len(rows), len(v.records)+1)
	}
	byID := map[string]row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, rec := range append(v.records, fixtureRecord(1000)) {
		if rec.ID == "1000" {
			rec.ID, rec.Reasoning = multibyteID, multibyteReasoning
		}
		r, ok := byID[rec.ID]
		if !ok {
			t.Errorf("no row of id %q", rec.ID)
			continue
		}
		want := preview(rec.Messages[1].Content, previewRunes)
		if r.Prompt != want || r.Prompt == "" {
			t.Errorf("id %q: the prompt's preview %q, want %q", rec.ID, r.Prompt, want)
		}
		if content, _ := answerOf(&rec); !strings.HasPrefix(content, strings.TrimSuffix(r.Answer, "…")) || r.Answer == "" {
			t.Errorf("id %q: the answer's preview %q, the content %q", rec.ID, r.Answer, content)
		}
	}
	if got := byID[hostileID].Answer; got != hostileContent {
		t.Errorf("the hostile record's answer previews as %q, want the text %q", got, hostileContent)
	}
	if n := eval[int](b, `document.images.length + document.querySelectorAll("#records script, #records svg, #records b").length`); n != 0 {
		t.Errorf("the table holds %d elements of a record's markup", n)
	}

	// Each link opens its own record: by id and sample, whatever its row.
	for _, id := range []string{"0", "21", hostileID, multibyteID} {
		r := byID[id]
		b.open(ts.URL+r.Href, false)
		if got := eval[string](b, `document.querySelector("h2 .id").textContent`); got != id {
			t.Errorf("the link %s of id %q opens the record of id %q", r.Href, id, got)
		}
	}
	b.open(ts.URL+"/record/21", false)
	if got := eval[string](b, `document.querySelector("h2 .id").textContent`); got != "21" {
		t.Errorf("/record/21 shows the record of id %q", got)
	}

	// One unit for a text's length, the table's and the page's.
	b.open(ts.URL+byID[multibyteID].Href, false)
	note := eval[string](b, `document.querySelector(".answer .col:first-child h4 .note").textContent`)
	want := strconv.Itoa(utf8.RuneCountInString(multibyteReasoning)) + " characters"
	if note != want || byID[multibyteID].RChars+" characters" != want {
		t.Errorf("reasoning of %q: the table says %s, the record page %q; want %q", multibyteID, byID[multibyteID].RChars, note, want)
	}

	// A schema failure had no HTTP answer: no "status 0". (A key that
	// failed for good is in the table with the errors filter.)
	b.open(ts.URL+"/records?errors=1", false)
	href := eval[string](b, `[...document.querySelectorAll("#records td.id a")].find(a => a.textContent === "schema-key").getAttribute("href")`)
	b.open(ts.URL+href, false)
	statuses := eval[[]string](b, `[...document.querySelectorAll("table.meta tr, table.history tr")].filter(tr => tr.cells.length > 2 || tr.cells[0].textContent === "status").map(tr => tr.cells.length > 2 ? tr.cells[2].textContent : tr.cells[1].textContent)`)
	if len(statuses) < 2 {
		t.Errorf("the schema failure's page shows statuses %q", statuses)
	}
	for _, st := range statuses {
		if st == "0" {
			t.Errorf("the schema failure says status 0: %q", statuses)
		}
	}
	b.screenshot("record-schema.png")
	b.quiet()
}

// TestViewBrowserRecordsTableFits: in a window 1,400 px wide (900 high)
// every column of the records table can be read: either the table fits
// the window, or it scrolls sideways inside a box of its own that fits
// the window, with the last column reached by scrolling that box; the
// page itself does not scroll sideways, and each header sits over its
// own column.
func TestViewBrowserRecordsTableFits(t *testing.T) {
	b := newBrowser(t)
	v := resumedViewDir(t)
	s, ts := serve(t, Options{Dirs: []string{v.dir}})
	if err := s.Index().Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.EmulateViewport(1400, 900))
	b.open(ts.URL+"/records?per=50", false)
	b.screenshot("records-1400.png")
	type fit struct {
		Viewport   float64   `json:"viewport"`
		PageWidth  float64   `json:"page_width"`
		Scroller   bool      `json:"scroller"`
		BoxLeft    float64   `json:"box_left"`
		BoxRight   float64   `json:"box_right"`
		Headers    []string  `json:"headers"`
		Lefts      []float64 `json:"lefts"`
		Rights     []float64 `json:"rights"`
		CellLefts  []float64 `json:"cell_lefts"`
		CellRights []float64 `json:"cell_rights"`
	}
	// measure scrolls the table's box (if it has one) to its end, then
	// reads where each header and each cell of the first row is.
	const measure = `(() => {
		const table = document.getElementById("records"), vw = document.documentElement.clientWidth;
		let box = table.parentElement;
		while (box && box !== document.body && !/auto|scroll/.test(getComputedStyle(box).overflowX)) box = box.parentElement;
		const scroller = !!box && box !== document.body;
		let left = 0, right = vw;
		if (scroller) { box.scrollLeft = box.scrollWidth; const r = box.getBoundingClientRect(); left = r.left; right = r.right; }
		const ths = [...table.querySelectorAll("thead th")], tds = [...table.querySelector("tbody tr").cells];
		return {viewport: vw, page_width: document.documentElement.scrollWidth, scroller: scroller, box_left: left, box_right: right,
			headers: ths.map(th => th.textContent),
			lefts: ths.map(th => th.getBoundingClientRect().left), rights: ths.map(th => th.getBoundingClientRect().right),
			cell_lefts: tds.map(td => td.getBoundingClientRect().left), cell_rights: tds.map(td => td.getBoundingClientRect().right)};
	})()`
	f := eval[fit](b, measure)
	if f.Viewport != 1400 {
		t.Fatalf("the window is %v px wide, want 1400", f.Viewport)
	}
	if f.PageWidth > f.Viewport {
		t.Errorf("the page is %v px wide in a window of %v: it scrolls sideways, the table's right is cut", f.PageWidth, f.Viewport)
	}
	if f.BoxLeft < 0 || f.BoxRight > f.Viewport+0.5 {
		t.Errorf("the table's box spans %.0f..%.0f px, the window 0..%.0f", f.BoxLeft, f.BoxRight, f.Viewport)
	}
	if len(f.Headers) < 13 || len(f.CellLefts) != len(f.Headers) {
		t.Fatalf("%d headers %q over %d cells", len(f.Headers), f.Headers, len(f.CellLefts))
	}
	// The last columns (latency, ttft, errors), once the box is scrolled to
	// its end, and every other one as well.
	for i, h := range f.Headers {
		if f.Rights[i] > f.BoxRight+0.5 || (!f.Scroller && f.Lefts[i] < f.BoxLeft-0.5) {
			t.Errorf("column %q spans %.0f..%.0f px, outside %.0f..%.0f (scrolling: %v)", h, f.Lefts[i], f.Rights[i], f.BoxLeft, f.BoxRight, f.Scroller)
		}
		if math.Abs(f.Lefts[i]-f.CellLefts[i]) > 0.5 || math.Abs(f.Rights[i]-f.CellRights[i]) > 0.5 {
			t.Errorf("header %q spans %.0f..%.0f px, its column's cell %.0f..%.0f", h, f.Lefts[i], f.Rights[i], f.CellLefts[i], f.CellRights[i])
		}
	}
	b.screenshot("records-1400-end.png")
	b.quiet()
}
