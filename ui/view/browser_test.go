package view

// The view in a real browser: headless Chromium driven by chromedp. The
// tests skip, saying why, where no Chromium is found; under CI=true they
// fail instead (.ci/run installs Debian's chromium). Screenshots go to the
// test's artifact directory (kept with go test -artifacts), named in the
// log.

import (
	"context"
	"encoding/json"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/sink"
)

// chromium is the path of a Chromium to drive: $SYNTHGEN_TEST_CHROMIUM,
// else the first of chromium, chromium-browser, google-chrome on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SYNTHGEN_TEST_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("SYNTHGEN_TEST_CHROMIUM=%s: %v", p, err)
		}
		return path
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no Chromium found (chromium, chromium-browser or google-chrome on PATH, or SYNTHGEN_TEST_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("browser test cannot run in CI: %s; .ci/run installs Debian's chromium", why)
	}
	t.Skipf("browser test skipped: %s; on Debian: apt-get install chromium", why)
	return ""
}

// browser is one headless Chromium tab, with what the page said: console
// errors and exceptions (a CSP violation is one), dialogs (alert) that
// opened, and every URL it asked for.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	console  []string
	dialogs  []string
	requests []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser, no timeout: see chromedp.Run
		t.Fatalf("start %s: %v", path, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			b.console = append(b.console, "exception: "+e.ExceptionDetails.Text+" "+describe(e.ExceptionDetails.Exception))
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type == cdpruntime.ConsoleAPICalledTypeError || e.Type == cdpruntime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, describe(a))
				}
				b.console = append(b.console, "console."+string(e.Type)+": "+strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				b.console = append(b.console, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *cdppage.EventJavascriptDialogOpening:
			b.dialogs = append(b.dialogs, string(e.Type)+": "+e.Message)
			go func() { // a dialog blocks the page: dismiss it
				_, _ = chromedp.Call(ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, e.Request.URL)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func describe(o *cdpruntime.RemoteObject) string {
	if o == nil {
		return ""
	}
	if o.Description != "" {
		return o.Description
	}
	return string(o.Value)
}

// do runs steps with a deadline.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression into a T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// open loads u and waits until its plots are drawn (when it has any).
func (b *browser) open(u string, plots bool) {
	b.t.Helper()
	b.do(chromedp.Navigate(u))
	if plots {
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.getAttribute("data-plots-ready") === "1"`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
			b.t.Fatalf("%s: the plots were not drawn: %v; console: %v", u, err, b.said())
		}
	}
}

// filterBy ticks the table's filter checkbox name and submits the form,
// waiting for the page it loads.
func (b *browser) filterBy(name string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(`input[name="` + name + `"]`)))
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(cdppage.LoadEventFired, nil,
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))); err != nil {
		b.t.Fatal(err)
	}
}

// said is what the page said so far.
func (b *browser) said() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(slices.Clone(b.console), b.dialogs...)
}

// quiet fails the test for any console error, exception or dialog.
func (b *browser) quiet() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		b.t.Errorf("the page said: %s", m)
	}
	for _, d := range b.dialogs {
		b.t.Errorf("a dialog opened: %s", d)
	}
}

// screenshot writes the whole page to the test's artifacts.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(b.t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d bytes; kept with go test -artifacts)", path, len(png))
}

type plotInfo struct {
	Title  string   `json:"title"`
	Points int      `json:"points"`
	Drawn  int      `json:"drawn"`
	Gaps   int      `json:"gaps"`
	Total  int      `json:"total"`
	Series []string `json:"series"`
}

// checkRunPage: the run page's plots hold every point of the history (a
// gap between the two runs, not a point), the distributions every record,
// and its figures are report.json's: byte for byte as the file spells
// them in the cell's data-value, and as a person reads them in its text.
func checkRunPage(t *testing.T, b *browser, v *viewDir, records int) {
	t.Helper()
	plots := eval[map[string]plotInfo](b, `window.synthgenPlots`)
	for _, id := range timePlots {
		p, ok := plots[id]
		if !ok {
			t.Errorf("no plot %s; plots: %v", id, plots)
			continue
		}
		if p.Points != len(v.history) || p.Drawn-p.Gaps != p.Points || p.Gaps != 1 {
			t.Errorf("plot %s (%s): %d points (%d drawn, %d gaps), the history holds %d in two runs", id, p.Title, p.Points, p.Drawn, p.Gaps, len(v.history))
		}
	}
	checkRunMarks(t, b)
	if s := plots["d0-tok"].Series; !slices.Contains(s, "server (/metrics)") || !slices.Contains(s, "client, last 10 s") {
		t.Errorf("the tok/s plot shows %v: the client's beside the server's", s)
	}
	// Each count of the in-flight plot says what it counts; paced keys and
	// the requests of every turn are series of their own (issue 41).
	for id, want := range map[string][]string{
		"d0-inflight": {"in flight (keys holding a slot)", "paced (of them, waiting for a rate limit's share)", "limit"},
		"d0-req":      {"keys/s, last 10 s", "requests/s, every turn, whole run"},
	} {
		for _, w := range want {
			if !slices.Contains(plots[id].Series, w) {
				t.Errorf("plot %s shows %v, not %q", id, plots[id].Series, w)
			}
		}
	}
	if note := eval[string](b, `document.getElementById("d0-inflight").textContent`); !strings.Contains(note, "in flight: keys holding a slot") {
		t.Errorf("the in-flight plot does not say what in flight counts: %q", note)
	}
	for _, id := range []string{"completion", "reasoning", "content", "latency", "ttft"} {
		if p := plots[id]; p.Total != records || p.Points != histBins {
			t.Errorf("distribution %s: %d records in %d bins, want %d in %d", id, p.Total, p.Points, records, histBins)
		}
	}
	if p := plots["finish"]; p.Total != records+len(v.failed) {
		t.Errorf("finish reasons: %d, want %d records and %d failed keys", p.Total, records, len(v.failed))
	}
	raw, err := os.ReadFile(filepath.Join(v.dir, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	var report map[string]json.RawMessage
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	shown := eval[map[string][2]string](b, `Object.fromEntries([...document.querySelectorAll("#dir-0 table.figures tr[data-key]")].map(tr => [tr.dataset.key, [tr.querySelector("td").dataset.value, tr.querySelector("td").textContent]]))`)
	if len(shown) < 15 {
		t.Errorf("the page shows %d figures of report.json", len(shown))
	}
	for k, got := range shown {
		want := string(report[k])
		if s, err := strconv.Unquote(want); err == nil {
			want = s
		}
		if got[0] != want {
			t.Errorf("figure %s: the page holds %q, report.json %q", k, got[0], want)
		}
		checkFigureText(t, k, got[1], want)
	}
}

// checkFigureText: a figure reads as a person reads one: a number with
// its digits grouped and at most three decimals, within a rounding of
// the file's; anything else as the file spells it.
func checkFigureText(t *testing.T, key, text, raw string) {
	t.Helper()
	// A time to first token with none streamed is written 0 and reads n/a.
	if noSample[key] && raw == "0" {
		if text != "n/a (no answer streamed)" {
			t.Errorf("figure %s: the page shows %q for no sample, want n/a", key, text)
		}
		return
	}
	want, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		if text != raw {
			t.Errorf("figure %s: the page shows %q, the file %q", key, text, raw)
		}
		return
	}
	if !regexp.MustCompile(`^-?\d{1,3}(,\d{3})*(\.\d{1,3})?$`).MatchString(text) {
		t.Errorf("figure %s: the page shows %q for %s: not a number a person reads", key, text, raw)
		return
	}
	got, _ := strconv.ParseFloat(strings.ReplaceAll(text, ",", ""), 64)
	if math.Abs(got-want) > 0.05+0.005*math.Abs(want) {
		t.Errorf("figure %s: the page shows %q, the file %s", key, text, raw)
	}
}

// TestViewBrowserRunPage: the run page loads without a console error and
// plots every point of the history and every record.
func TestViewBrowserRunPage(t *testing.T) {
	b := newBrowser(t)
	v := makeViewDir(t, sink.FormatParquet)
	_, ts := serve(t, Options{Dirs: []string{v.dir}})
	b.open(ts.URL+"/", true)
	checkRunPage(t, b, v, len(v.records))
	b.screenshot("run.png")
	b.quiet()
}

// TestViewBrowserTruncatedFilter: ticking "truncated" in the form shows
// exactly the records cut at max_tokens.
func TestViewBrowserTruncatedFilter(t *testing.T) {
	b := newBrowser(t)
	v := makeViewDir(t, sink.FormatJSONL)
	s, ts := serve(t, Options{Dirs: []string{v.dir}})
	if err := s.Index().Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.open(ts.URL+"/records", false)
	b.filterBy("truncated")
	if got := eval[string](b, `location.search`); !strings.Contains(got, "truncated=1") {
		t.Fatalf("the form went to %s", got)
	}
	// Every page of the answer, by its "next" link.
	var ids []string
	for pages := 0; ; pages++ {
		ids = append(ids, eval[[]string](b, `[...document.querySelectorAll("#records tbody tr td.id")].map(td => td.textContent)`)...)
		finishes := eval[[]string](b, `[...document.querySelectorAll("#records tbody tr td.finish")].map(td => td.textContent)`)
		for _, f := range finishes {
			if f != "length" {
				t.Errorf("a row of finish_reason %q under the truncated filter", f)
			}
		}
		next := eval[string](b, `(document.querySelector('a[rel="next"]') || {}).href || ""`)
		if next == "" || pages > 10 {
			break
		}
		b.open(next, false)
	}
	var want []string
	for _, r := range v.records {
		if r.FinishReason == "length" {
			want = append(want, r.ID)
		}
	}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("the truncated filter shows %d records %v\nwant %d %v", len(ids), ids, len(want), want)
	}
	if total := eval[string](b, `document.getElementById("total").textContent`); total != strconv.Itoa(len(want)) {
		t.Errorf("the count says %s, want %d", total, len(want))
	}
	b.quiet()
}

// TestViewBrowserHostileRecord: the record whose content is a script and
// an image with onerror shows that markup as text on its page, in the
// table and in a search; no script of it runs, no dialog opens, no image
// is asked for.
func TestViewBrowserHostileRecord(t *testing.T) {
	b := newBrowser(t)
	v := makeViewDir(t, sink.FormatJSONL)
	s, ts := serve(t, Options{Dirs: []string{v.dir}})
	if err := s.Index().Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.open(ts.URL+recordURL(hostileID, 0, 0), false)
	if got := eval[string](b, `document.querySelector("pre.content").textContent`); got != hostileContent {
		t.Errorf("the content shows as %q, want the text %q", got, hostileContent)
	}
	if got := eval[string](b, `document.querySelector("h2 .id").textContent`); got != hostileID {
		t.Errorf("the id shows as %q", got)
	}
	for _, expr := range []string{`document.images.length`, `document.scripts.length`, `document.querySelectorAll("svg, b, iframe, object, embed").length`} {
		if n := eval[int](b, expr); n != 0 {
			t.Errorf("%s = %d on the record page: the record's markup became elements", expr, n)
		}
	}
	b.screenshot("record.png")
	b.open(ts.URL+"/records?per=10", false)
	b.open(ts.URL+"/records?q="+url.QueryEscape("<script>"), false)
	if n := eval[int](b, `document.querySelectorAll(".match").length`); n != 1 {
		t.Errorf("a search for <script> found %d records, want the hostile one", n)
	}
	if n := eval[int](b, `document.images.length`); n != 0 {
		t.Errorf("the search page holds %d images", n)
	}
	b.mu.Lock()
	for _, u := range b.requests {
		if strings.HasSuffix(u, "/x") {
			t.Errorf("the page asked for the record's image: %s", u)
		}
	}
	b.mu.Unlock()
	b.quiet()
}

// TestViewBrowserStaticReport: the file --html writes opens from disk,
// with no server, asks for nothing but itself, and plots what the served
// page plots.
func TestViewBrowserStaticReport(t *testing.T) {
	b := newBrowser(t)
	v := makeViewDir(t, sink.FormatParquet)
	out := filepath.Join(t.TempDir(), "report.html")
	if _, err := WriteReport(context.Background(), ReportOptions{Dirs: []string{v.dir}, Out: out}); err != nil {
		t.Fatal(err)
	}
	b.open("file://"+out, true)
	checkRunPage(t, b, v, len(v.records))
	if n := eval[int](b, `document.querySelectorAll(".sample-record").length`); n < 4 {
		t.Errorf("%d sample records in the report", n)
	}
	b.screenshot("report.png")
	b.mu.Lock()
	for _, u := range b.requests {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the report asked for %s", u)
		}
	}
	b.mu.Unlock()
	b.quiet()
}
