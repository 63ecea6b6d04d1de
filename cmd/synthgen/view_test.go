package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// sampleDataset is the bundled sample `make run` answers.
const sampleDataset = "../../examples/data/sample.jsonl"

// runSample runs the bundled sample's config against baseURL into out,
// with a JSON progress line (and a history point) every 250 ms.
func runSample(t *testing.T, name, baseURL, out string) *proc {
	t.Helper()
	return startSynthgen(t, name, "run", "--config", "../../examples/sample.yaml",
		"--dataset.path", sampleDataset, "--endpoint.base_url", baseURL, "--output.dir", out,
		"--progress.interval", "250ms", "--log-format", "json")
}

// startView serves dirs with the built binary on a free loopback port and
// returns the URL it printed.
func startView(t *testing.T, args ...string) (string, *proc) {
	t.Helper()
	p := startSynthgen(t, "view", append([]string{"view", "--addr", "127.0.0.1:0"}, args...)...)
	re := regexp.MustCompile(`view: (http://\S+) \(`)
	p.waitForOutput(t, false, re, 30*time.Second)
	return re.FindStringSubmatch(p.stdout(t))[1], p
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// viewHistory is what the view's /api/history says of a directory.
type viewHistory struct {
	Points int                   `json:"points"`
	T      []float64             `json:"t"`
	Lines  map[string][]*float64 `json:"lines"`
	Runs   []struct {
		Run         int     `json:"run"`
		From        float64 `json:"from"`
		To          float64 `json:"to"`
		AlreadyDone int64   `json:"already_done"`
		Points      int     `json:"points"`
		State       string  `json:"state"`
	} `json:"runs"`
	Outages []struct {
		From float64 `json:"from"`
		To   float64 `json:"to"`
	} `json:"outages"`
}

func fetchJSON[T any](t *testing.T, u string) T {
	t.Helper()
	var v T
	for deadline := time.Now().Add(time.Minute); ; {
		code, body := httpGet(t, u)
		if code == http.StatusAccepted && time.Now().Before(deadline) { // the index is being built
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", u, code, body)
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		return v
	}
}

// historyLines counts the lines of dir's history.jsonl.
func historyLines(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, runfiles.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// checkFiguresAreTheReport: every figure the run page shows for the
// directory is report.json's, as the file spells it (the cell's
// data-value; its text is the number rounded for a person).
func checkFiguresAreTheReport(t *testing.T, page, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	var report map[string]json.RawMessage
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`<tr data-key="([a-z0-9_]+)"><th>[^<]*<code>[^<]*</code></th><td class="v" data-value="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(rows) < 20 {
		t.Fatalf("the run page shows %d figures", len(rows))
	}
	for _, r := range rows {
		want := string(report[r[1]])
		if s, err := strconv.Unquote(want); err == nil {
			want = s
		}
		if got := html.UnescapeString(r[2]); got != want {
			t.Errorf("figure %s: the page holds %q, report.json %q", r[1], got, want)
		}
	}
}

// viewDist is the part of /api/dist these tests read.
type viewDist struct {
	Records          int64 `json:"records"`
	Truncated        int64 `json:"truncated"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	Completion       struct {
		P50 float64 `json:"p50"`
		P90 float64 `json:"p90"`
		Max float64 `json:"max"`
	} `json:"completion_tokens_hist"`
}

// checkRampUp: a run starts with fewer requests in flight than its limit,
// and the limit is reached: the ramp-up a plot shows.
func checkRampUp(t *testing.T, h viewHistory, from, n int, limit float64) {
	t.Helper()
	first, peak := *h.Lines["in_flight"][from], 0.0
	for i := from; i < from+n; i++ {
		if v := h.Lines["in_flight"][i]; v != nil {
			peak = math.Max(peak, *v)
		}
	}
	if first >= limit || peak != limit {
		t.Errorf("run at point %d: in flight %v at first, %v at most; want a ramp up to %v", from, first, peak, limit)
	}
}

// TestViewOfTheSampleRun: `make run`'s job (the bundled sample against the
// mock) seen by `synthgen view`: the page's figures are report.json's, the
// records on disk agree with the run's own figures, every history line is
// a point, and the plots show the ramp-up.
func TestViewOfTheSampleRun(t *testing.T) {
	t.Parallel() // its own mocks, directories and processes
	m := startMockProcess(t, "--token-delay", "2ms", "--ttft", "50ms")
	out := filepath.Join(t.TempDir(), "sample")
	if code := runSample(t, "run", m.BaseURL, out).wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the sample run exited %d", code)
	}
	url, _ := startView(t, out)
	_, page := httpGet(t, url)
	checkFiguresAreTheReport(t, page, out)

	var rep runfiles.ReportRecord
	raw, _ := os.ReadFile(filepath.Join(out, runfiles.ReportFile))
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	d := fetchJSON[viewDist](t, url+"api/dist")
	if d.Records != rep.Done || d.CompletionTokens != rep.CompletionTokens || d.PromptTokens != rep.PromptTokens ||
		int64(d.Completion.P50) != rep.CompletionP50 || int64(d.Completion.P90) != rep.CompletionP90 || int64(d.Completion.Max) != rep.CompletionMax ||
		math.Abs(float64(d.Truncated)/float64(d.Records)-rep.TruncatedShare) > 1e-12 {
		t.Errorf("the records on disk: %+v\nreport.json: done %d, tokens %d/%d, completion p50 %d p90 %d max %d, truncated %v",
			d, rep.Done, rep.PromptTokens, rep.CompletionTokens, rep.CompletionP50, rep.CompletionP90, rep.CompletionMax, rep.TruncatedShare)
	}
	h := fetchJSON[viewHistory](t, url+"api/history?dir=0")
	if h.Points != historyLines(t, out) || len(h.Runs) != 1 || h.Points < 3 {
		t.Fatalf("%d points in %d runs; history.jsonl has %d lines", h.Points, len(h.Runs), historyLines(t, out))
	}
	checkRampUp(t, h, 0, h.Points, float64(rep.Config.Concurrency))
}

// TestViewOfAResumedRunWithARestart: the sample interrupted, then resumed
// while the server restarts in the middle. The history holds both runs,
// the second a resume of what the first did; the restart is an outage in
// the second; each run ramps up; the page's figures are report.json's;
// in a browser each plot holds every point (screenshot in the artifacts).
func TestViewOfAResumedRunWithARestart(t *testing.T) {
	t.Parallel() // its own mocks, directories and processes
	out := filepath.Join(t.TempDir(), "resumed")
	// Run 1: ~300 tokens an answer at 5 ms, 1.5 s a wave of 64; stopped
	// by Ctrl-C once the first answers are in.
	m1 := startMockProcess(t, "--token-delay", "5ms", "--ttft", "50ms")
	p := runSample(t, "run1", m1.BaseURL, out)
	waitProgress(t, p, time.Minute, func(l progressLine) bool { return l.Done >= 10 })
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, time.Minute); code != exitInterrupted {
		t.Fatalf("run 1 exited %d, want %d", code, exitInterrupted)
	}
	firstRun := historyLines(t, out)

	// Run 2, against a server that goes away for 1.5 s, 1.5 s in.
	m2 := mockserver.New(mockserver.Options{TokenDelay: 5 * time.Millisecond, TTFT: 50 * time.Millisecond,
		RestartAt: 1500 * time.Millisecond, RestartFor: 1500 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m2.Serve(ctx, ln, time.Second) }()
	defer func() { stop(); <-served }()
	if code := runSample(t, "run2", "http://"+ln.Addr().String()+"/v1", out).wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("run 2 exited %d", code)
	}

	url, _ := startView(t, out)
	_, page := httpGet(t, url)
	checkFiguresAreTheReport(t, page, out)
	h := fetchJSON[viewHistory](t, url+"api/history?dir=0")
	if h.Points != historyLines(t, out) || len(h.Runs) != 2 || h.Runs[0].Points != firstRun {
		t.Fatalf("%d points, runs %+v; history.jsonl has %d lines, %d of run 1", h.Points, h.Runs, historyLines(t, out), firstRun)
	}
	var rep runfiles.ReportRecord
	raw, _ := os.ReadFile(filepath.Join(out, runfiles.ReportFile))
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if r2 := h.Runs[1]; r2.AlreadyDone != rep.AlreadyDone || r2.AlreadyDone == 0 || r2.State != "done" || h.Runs[0].State != "interrupted" {
		t.Errorf("run 2 resumed %d keys done (report.json: %d), states %s then %s", r2.AlreadyDone, rep.AlreadyDone, h.Runs[0].State, r2.State)
	}
	inRun2 := 0
	for _, o := range h.Outages {
		if o.From >= h.Runs[1].From-1 && o.To <= h.Runs[1].To {
			inRun2++
		}
	}
	if inRun2 == 0 {
		t.Errorf("no outage in run 2 (%v..%v): %+v", h.Runs[1].From, h.Runs[1].To, h.Outages)
	}
	checkRampUp(t, h, 0, h.Runs[0].Points, 64)
	checkRampUp(t, h, h.Runs[0].Points, h.Runs[1].Points, 64)
	d := fetchJSON[viewDist](t, url+"api/dist")
	if d.Records != 300 || d.Records != rep.Done {
		t.Errorf("%d records on disk, report.json says %d done", d.Records, rep.Done)
	}
	browsePlots(t, url, h.Points)
}

// browsePlots opens the run page in headless Chromium (when there is one;
// see internal/view's browser tests): no console error, and every time
// plot holds the history's points, the two runs apart.
func browsePlots(t *testing.T, url string, points int) {
	t.Helper()
	path := ""
	for _, name := range []string{os.Getenv("SYNTHGEN_TEST_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); name != "" && err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("browser check cannot run in CI: no Chromium found; .ci/run installs Debian's chromium")
		}
		t.Log("browser check skipped: no Chromium found (chromium, chromium-browser or google-chrome on PATH, or SYNTHGEN_TEST_CHROMIUM)")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	messages := chromedp.Console(bctx)
	ctx, done := context.WithTimeout(bctx, 2*time.Minute)
	defer done()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.getAttribute("data-plots-ready") === "1"`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the plots were not drawn: %v", err)
	}
	type plot struct {
		Title         string
		Points, Drawn int
		Gaps          int
		Labels        []struct {
			Run         int
			Text        string
			Left, Right float64
			SegLeft     float64 `json:"seg_left"`
			SegRight    float64 `json:"seg_right"`
		}
	}
	plots, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]plot](`window.synthgenPlots`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d0-tok", "d0-req", "d0-inflight", "d0-errors"} {
		p := plots[id]
		if p.Points != points || p.Drawn != points+1 || p.Gaps != 1 {
			t.Errorf("plot %s: %+v, want %d points in two runs", id, p, points)
		}
		// Each run's label inside its own run's span (issue 28: run 2's
		// was drawn over run 1).
		for _, l := range p.Labels {
			if l.Left < l.SegLeft || l.Right > l.SegRight {
				t.Errorf("plot %s: the label %q spans %.0f..%.0f px, its run %.0f..%.0f", id, l.Text, l.Left, l.Right, l.SegLeft, l.SegRight)
			}
		}
		if len(p.Labels) == 0 {
			t.Errorf("plot %s: no run labelled", id)
		}
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.ArtifactDir(), "resumed-run.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (kept with go test -artifacts)", shot)
	cancel() // ends the console's iteration
	for m, err := range messages {
		if err != nil {
			break
		}
		if m.Type == chromedp.ConsoleError || m.IsException() {
			t.Errorf("the page said: %s", m)
		}
	}
}

// TestViewAddressAndReport: a non-loopback --addr is refused without
// --public, and with it needs the printed token; --html writes the report
// outside the directories only, and changes nothing in them.
func TestViewAddressAndReport(t *testing.T) {
	m := startMock(t, mockserver.Options{MeanTokens: 20})
	work := t.TempDir()
	out := filepath.Join(work, "out")
	p := startSynthgen(t, "run", "run", "--dataset.path", writeShareGPT(t, work, 30), "--endpoint.base_url", m.BaseURL,
		"--output.dir", out, "--concurrency", "4")
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}

	refused := startSynthgen(t, "refused", "view", out, "--addr", "0.0.0.0:0")
	if code := refused.wait(t, 30*time.Second); code != exitUsage || !strings.Contains(refused.stderr(t), "not loopback") {
		t.Errorf("a public address without --public: exit %d\n%s", code, refused.stderr(t))
	}
	pub := startSynthgen(t, "public", "view", out, "--addr", "0.0.0.0:0", "--public")
	re := regexp.MustCompile(`view: http://\S+:(\d+)/\?token=([0-9a-f]{32}) \(`)
	pub.waitForOutput(t, false, re, 30*time.Second)
	mm := re.FindStringSubmatch(pub.stdout(t))
	base := "http://127.0.0.1:" + mm[1] + "/"
	if code, _ := httpGet(t, base); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code, _ := httpGet(t, base+"?token="+strings.Repeat("0", 32)); code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d", code)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	resp, err := c.Get(base + "records?token=" + mm[2])
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Errorf("with the token: %s at %s", resp.Status, resp.Request.URL)
	}
	pub.signal(t, syscall.SIGINT)
	if code := pub.wait(t, 30*time.Second); code != 0 {
		t.Errorf("view exited %d after Ctrl-C", code)
	}

	before := treeState(t, out)
	inside := startSynthgen(t, "inside", "view", out, "--html", filepath.Join(out, "report.html"))
	if code := inside.wait(t, 30*time.Second); code != exitUsage || !strings.Contains(inside.stderr(t), "never writes into an output directory") {
		t.Errorf("--html inside DIR: exit %d\n%s", code, inside.stderr(t))
	}
	report := filepath.Join(work, "report.html")
	html := startSynthgen(t, "html", "view", out, "--html", report)
	if code := html.wait(t, time.Minute); code != 0 {
		t.Fatalf("--html exited %d\n%s", code, html.stderr(t))
	}
	b, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(b), `id="view-data"`) {
		t.Errorf("the report: %d bytes, %v", len(b), err)
	}
	if after := treeState(t, out); after != before {
		t.Errorf("view changed the directory:\n%s\n%s", before, after)
	}
}

// treeState lists every file under dir with its size and modification time.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + strconv.FormatInt(st.Size(), 10) + " " + st.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestViewOfALiveRun: a view opened while the sample runs (Parquet: parts
// journaled, then converted) says the run is live, counts what is on disk
// so far, and follows the run to its end: every record once, as many as
// report.json says are done.
func TestViewOfALiveRun(t *testing.T) {
	t.Parallel() // its own mocks, directories and processes
	// ~300 tokens an answer at 10 ms: 3 s a wave of 64, five waves; the
	// view starts after the first.
	m := startMockProcess(t, "--token-delay", "10ms", "--ttft", "50ms")
	out := filepath.Join(t.TempDir(), "live")
	p := startSynthgen(t, "run", "run", "--config", "../../examples/sample.yaml",
		"--dataset.path", sampleDataset, "--endpoint.base_url", m.BaseURL, "--output.dir", out,
		"--output.format", "parquet", "--progress.interval", "250ms", "--log-format", "json")
	waitProgress(t, p, time.Minute, func(l progressLine) bool { return l.Done >= 70 })
	url, _ := startView(t, out)
	if _, page := httpGet(t, url); !strings.Contains(page, `class="live"`) {
		t.Errorf("the run page does not say the run is live")
	}
	early := fetchJSON[viewDist](t, url+"api/dist")
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the run exited %d", code)
	}
	var rep runfiles.ReportRecord
	raw, _ := os.ReadFile(filepath.Join(out, runfiles.ReportFile))
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	var last viewDist
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = fetchJSON[viewDist](t, url+"api/dist"); last.Records == rep.Done {
			break
		}
	}
	if early.Records >= rep.Done || last.Records != rep.Done || last.CompletionTokens != rep.CompletionTokens {
		t.Errorf("records on disk: %d while running, %d at the end (%d completion tokens); report.json: %d done, %d tokens",
			early.Records, last.Records, last.CompletionTokens, rep.Done, rep.CompletionTokens)
	}
	if _, page := httpGet(t, url); strings.Contains(page, `class="live"`) {
		t.Errorf("the run page still says live after the run ended")
	}
	h := fetchJSON[viewHistory](t, url+"api/history?dir=0")
	if h.Points != historyLines(t, out) {
		t.Errorf("%d points, history.jsonl has %d lines", h.Points, historyLines(t, out))
	}
}

// TestViewReportKeepsWhatExists: --html refuses a file that exists unless
// --overwrite, refuses a path inside a DIR however it is spelled (through
// a link to the directory, or a link to a file in it), and leaves no
// temporary behind.
func TestViewReportKeepsWhatExists(t *testing.T) {
	t.Parallel()
	ds := inspectDataset(t, 6)
	dir := inspectFixture(t, sink.FormatJSONL, ds, seq(0, 5, 1), []int{5}, "")
	work := t.TempDir()
	important := filepath.Join(work, "important.txt")
	if err := os.WriteFile(important, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, "view", dir, "--html", important)
	if code := exitCode(r.err); code != exitUsage || !strings.Contains(r.err.Error(), "exists") || !strings.Contains(r.err.Error()+hintOf(r.err), "--overwrite") {
		t.Errorf("--html over an existing file: exit %d: %v", code, r.err)
	}
	if b, _ := os.ReadFile(important); string(b) != "keep me" {
		t.Errorf("the existing file now holds %d bytes", len(b))
	}
	cliRun(t, "view", dir, "--html", important, "--overwrite").ok(t, "--html --overwrite")
	if b, _ := os.ReadFile(important); !strings.Contains(string(b), `id="view-data"`) {
		t.Errorf("--overwrite did not write the report: %.40q", b)
	}

	link := filepath.Join(work, "hl")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(work, "fl.html")
	if err := os.Symlink(filepath.Join(dir, "r.html"), fileLink); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, dir)
	for _, out := range []string{filepath.Join(link, "r.html"), fileLink, filepath.Join(dir, "data", "..", "r.html")} {
		for _, extra := range [][]string{nil, {"--overwrite"}} {
			r := cliRun(t, append([]string{"view", dir, "--html", out}, extra...)...)
			if code := exitCode(r.err); code != exitUsage || !strings.Contains(r.err.Error(), "never writes into an output directory") {
				t.Errorf("--html %s %v: exit %d: %v", out, extra, code, r.err)
			}
		}
	}
	if after := treeState(t, dir); after != before {
		t.Errorf("view wrote into the directory:\n%s\n%s", before, after)
	}
	entries, _ := os.ReadDir(work)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a temporary was left: %s", e.Name())
		}
	}
}

// hintOf is the hint an exit error carries, or "".
func hintOf(err error) string {
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}
