package view

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/sink"
)

// viewDir is a finished directory of 137 records (one hostile), errors, a
// history of two runs and a report.json.
type viewDir struct {
	*fixture
	history []runfiles.HistoryRecord
	report  runfiles.ReportRecord
}

func makeViewDir(t testing.TB, format string) *viewDir {
	t.Helper()
	f, _ := writeFixture(t, t.TempDir(), format, 137, 20, false)
	v := &viewDir{fixture: f, history: writeHistory(t, f.dir, 20, 10)}
	last := v.history[len(v.history)-1]
	v.report = runfiles.ReportRecord{Event: "report", ExitCode: 3, Error: "3 requests failed for good", EndedAt: last.Time,
		DurationS: 123.5, Written: 137, Failed: 3, StatusRecord: last.StatusRecord}
	v.report.TokPerS, v.report.CompletionP50, v.report.TruncatedShare = 1371.7, 250, 0.2
	b, err := json.MarshalIndent(v.report, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, runfiles.ReportFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return v
}

// serve starts a view of dirs on a loopback httptest server.
func serve(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		_ = s.Index().Wait(context.Background())
		s.Close()
	})
	return s, ts
}

func get(t testing.TB, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// hostileMarkup are the hostile record's tags as a browser would parse
// them: none may reach a page unescaped.
var hostileMarkup = regexp.MustCompile(`(?i)<script>alert|<img src=x|<svg onload|<b onmouseover|onerror=alert\(\d\)>`)

// TestViewPagesEscapeEverything: the record page, the table and a search
// show the hostile record's id, source, messages, reasoning, content and
// finish reason as text, and every page carries the CSP that forbids
// inline script.
func TestViewPagesEscapeEverything(t *testing.T) {
	v := makeViewDir(t, sink.FormatJSONL)
	s, ts := serve(t, Options{Dirs: []string{v.dir}})
	if err := s.Index().Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	pos, err := s.Index().Find(0, sink.Key{ID: hostileID})
	if err != nil || pos < 0 {
		t.Fatalf("the hostile record: %d, %v", pos, err)
	}
	pages := map[string]string{
		"record":        "/record/" + url.PathEscape(hostileID),
		"record by key": "/record?id=" + url.QueryEscape(hostileID) + "&sample=0",
		"table":         "/records?per=10",
		"search":        "/records?q=" + url.QueryEscape("alert("),
		"run":           "/",
	}
	for name, p := range pages {
		resp, body := get(t, nil, ts.URL+p)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s\n%s", name, resp.Status, body)
			continue
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", name, csp)
		}
		if m := hostileMarkup.FindString(body); m != "" {
			t.Errorf("%s: the page holds %q unescaped", name, m)
		}
		if name != "run" && !strings.Contains(body, "&#34;&gt;&lt;svg onload=alert(7)&gt;") {
			t.Errorf("%s: the hostile id is not shown as text", name)
		}
		if name == "table" {
			// The previews of the prompt and the answer, as text too.
			for _, want := range []string{"&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"} {
				if !strings.Contains(body, want) {
					t.Errorf("table: the preview %q not shown as text", want)
				}
			}
		}
		if strings.HasPrefix(name, "record") {
			for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;",
				"&lt;img src=x onerror=alert(3)&gt;", "&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;", "&lt;b onmouseover=alert(6)&gt;stop&lt;/b&gt;"} {
				if !strings.Contains(body, want) {
					t.Errorf("%s: %q not shown as text", name, want)
				}
			}
		}
	}
}

// TestViewTokenAndHost: with a token, a request without it, or with a
// wrong one, is refused; the right one in the URL sets a cookie that
// opens every page; an unknown Host header is refused; nothing but GET.
func TestViewTokenAndHost(t *testing.T) {
	v := makeViewDir(t, sink.FormatJSONL)
	_, ts := serve(t, Options{Dirs: []string{v.dir}, Token: "s3cret-token"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/", "/records", "/api/history?dir=0", "/assets/view.js", "/?token=wrong"} {
		if resp, _ := get(t, noRedirect, ts.URL+p); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the token: %s", p, resp.Status)
		}
	}
	// A cookie of the right name but not the token opens nothing.
	for _, wrong := range []string{"wrong", "s3cret-toke", "s3cret-token-and-more"} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/records", nil)
		req.AddCookie(&http.Cookie{Name: tokenCookie, Value: wrong})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("with the cookie %s=%s: %s, want 401", tokenCookie, wrong, resp.Status)
		}
	}
	resp, _ := get(t, noRedirect, ts.URL+"/records?truncated=1&token=s3cret-token")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/records?truncated=1" {
		t.Fatalf("with the token: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", cookies)
	}
	for _, p := range []string{"/", "/records?truncated=1", "/api/history?dir=0", "/assets/view.js"} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+p, nil)
		req.AddCookie(cookies[0])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s with the cookie: %s", p, resp.Status)
		}
	}

	// A loopback server answers only to its own names.
	ls, err := NewServer(Options{Dirs: []string{v.dir}})
	if err != nil {
		t.Fatal(err)
	}
	local := httptest.NewUnstartedServer(ls)
	ls.opts.Hosts = LoopbackHosts(local.Listener.Addr())
	local.Start()
	defer func() { local.Close(); ls.Close() }()
	port := strconv.Itoa(local.Listener.Addr().(*net.TCPAddr).Port)
	for host, want := range map[string]int{"attacker.example:" + port: http.StatusMisdirectedRequest,
		"localhost:" + port: http.StatusOK, "127.0.0.1:" + port: http.StatusOK,
		// A host name is not case-sensitive (RFC 4343).
		"LOCALHOST:" + port: http.StatusOK, "LocalHost:" + port: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, local.URL+"/assets/view.css", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %s, want %d", host, resp.Status, want)
		}
	}
	resp, err = http.Post(local.URL+"/records", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", resp.Status)
	}
}

// TestViewTokenRedirectStaysHome: the redirect that takes the token out of
// the URL goes to a path of the view itself, whatever the path asked:
// "//evil.com/" is another origin to a browser; "/%5Cevil.com/" is not.
func TestViewTokenRedirectStaysHome(t *testing.T) {
	t.Parallel()
	v := makeViewDir(t, sink.FormatJSONL)
	_, ts := serve(t, Options{Dirs: []string{v.dir}, Token: "s3cret-token"})
	for path, want := range map[string]string{
		"//evil.com/?token=s3cret-token":          "/evil.com/",
		"///evil.com/x?token=s3cret-token&a=1":    "/evil.com/x?a=1",
		`/\evil.com/?token=s3cret-token`:          "/%5Cevil.com/",
		"/records?truncated=1&token=s3cret-token": "/records?truncated=1",
	} {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Written by hand: a client would clean the path first.
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+ts.Listener.Addr().String()+"\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		_ = conn.Close()
		loc := resp.Header.Get("Location")
		u, err := url.Parse(loc)
		if resp.StatusCode != http.StatusSeeOther || err != nil || u.Host != "" || u.Scheme != "" || loc != want {
			t.Errorf("GET %s: %s to %q, want %q on the same origin", path, resp.Status, loc, want)
		}
	}
}

// TestViewHistoryAPI: the history's series are its lines, one point each,
// with the runs (the second a resume), the outage and auto's moves.
func TestViewHistoryAPI(t *testing.T) {
	v := makeViewDir(t, sink.FormatJSONL)
	_, ts := serve(t, Options{Dirs: []string{v.dir}})
	resp, body := get(t, nil, ts.URL+"/api/history?dir=0")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	var h struct {
		Points    int                   `json:"points"`
		T         []float64             `json:"t"`
		Lines     map[string][]*float64 `json:"lines"`
		Errors    map[string][]float64  `json:"errors_by_cause"`
		Runs      []RunMark             `json:"runs"`
		Outages   []Outage              `json:"outages"`
		Moves     []Move                `json:"moves"`
		Endpoints []EndpointSeries      `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	if h.Points != len(v.history) || len(h.T) != h.Points {
		t.Fatalf("%d points, %d times; the history has %d lines", h.Points, len(h.T), len(v.history))
	}
	for i, r := range v.history {
		if got := h.Lines["in_flight"][i]; got == nil || *got != float64(r.InFlight) {
			t.Errorf("point %d: in_flight %v, want %d", i, got, r.InFlight)
		}
		if got, sv := h.Lines["prefix_cache_hit_rate"][i], r.Server; (got == nil) != (sv == nil || sv.PrefixCacheHitRate == nil) || (got != nil && *got != 25) {
			t.Errorf("point %d: prefix cache hit rate %v, server %+v; want 25 (percent) where the record has 0.25", i, got, sv)
		}
		if got := h.Lines["server_gen_tok_per_s"][i]; (got == nil) != (r.Server == nil) {
			t.Errorf("point %d: server tok/s %v, server %v", i, got, r.Server)
		}
		if got := h.Lines["limit"][i]; got == nil || (r.ConcurrencyAuto != nil && *got != float64(r.ConcurrencyAuto.Limit)) {
			t.Errorf("point %d: limit %v", i, got)
		}
		// Paced keys are their own series; requests a second with every
		// turn only where the record has them (several turns a key).
		if got := h.Lines["paced"][i]; got == nil || *got != float64(r.Paced) {
			t.Errorf("point %d: paced %v, want %d", i, got, r.Paced)
		}
		if got := h.Lines["requests_per_s"][i]; (got == nil) != (r.RequestsPerS == nil) || (got != nil && *got != *r.RequestsPerS) {
			t.Errorf("point %d: requests_per_s %v, want %v", i, got, r.RequestsPerS)
		}
	}
	if len(h.Runs) != 2 || h.Runs[0].Points != 20 || h.Runs[1].Points != 10 || h.Runs[1].AlreadyDone == 0 || h.Runs[1].State != "done" {
		t.Errorf("runs %+v", h.Runs)
	}
	down := v.history[12].ServerDownSince
	if len(h.Outages) != 1 || h.Outages[0].From != unixSec(*down) || h.Outages[0].To != unixSec(v.history[15].Time) {
		t.Errorf("outages %+v, want one from %v to %v", h.Outages, down, v.history[15].Time)
	}
	if len(h.Moves) != 2 || h.Moves[0].Limit != 48 || h.Moves[1].Reason != "kv 60%: room" {
		t.Errorf("moves %+v", h.Moves)
	}
	if len(h.Endpoints) != 2 || *h.Lines["done"][0] != 0 {
		t.Errorf("endpoints %+v", h.Endpoints)
	}
	if share := h.Endpoints[0].Share[len(v.history)-1]; share < 66.6 || share > 66.7 {
		t.Errorf("the first endpoint's share at the end: %v%%, want 2/3", share)
	}
}

// TestViewRecordsPaging: the table pages through every record; a filter
// in the URL keeps to its records; while the index is built the page says
// how far it is and reloads itself, and /api/dist answers 202.
func TestViewRecordsPaging(t *testing.T) {
	v := makeViewDir(t, sink.FormatParquet)
	s, err := NewServer(Options{Dirs: []string{v.dir}})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	s.ix.buildGate = gate
	ts := httptest.NewServer(s)
	defer func() { ts.Close(); s.Close() }()

	resp, body := get(t, nil, ts.URL+"/records")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="indexing"`) || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("while indexing: %s\n%s", resp.Status, body)
	}
	if resp, body := get(t, nil, ts.URL+"/api/dist"); resp.StatusCode != http.StatusAccepted || !strings.Contains(body, `"bytes":`) {
		t.Errorf("/api/dist while indexing: %s %s", resp.Status, body)
	}
	close(gate)
	if err := s.ix.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile(`<tr data-pos="(\d+)"`)
	var seen []string
	next := "/records?per=25"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("more pages than records")
		}
		_, body := get(t, nil, ts.URL+next)
		for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
			seen = append(seen, m[1])
		}
		next = ""
		if m := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 137 || len(slices.Compact(slices.Sorted(slices.Values(seen)))) != 137 {
		t.Errorf("paging showed %d rows (%d distinct), want the 137 records", len(seen), len(slices.Compact(slices.Sorted(slices.Values(seen)))))
	}
	_, body = get(t, nil, ts.URL+"/records?truncated=1&per=500")
	want := 0
	for _, r := range v.records {
		if r.FinishReason == "length" {
			want++
		}
	}
	if got := len(rowRE.FindAllString(body, -1)); got != want || strings.Count(body, `class="truncated"`) != want {
		t.Errorf("truncated filter: %d rows, want %d", got, want)
	}
	if resp, body := get(t, nil, ts.URL+"/records?min_tokens=ten"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "min_tokens") {
		t.Errorf("a bad bound: %s", resp.Status)
	}
	if resp, body := get(t, nil, ts.URL+"/api/dist"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"records":137`) {
		t.Errorf("/api/dist: %s %s", resp.Status, body)
	}
	_ = time.Second
}

// TestViewRunPageShowsTheBatches: a batch-mode directory's run page lists
// each batch of batches.json with its step, the provider's status and
// counts, and its id; what the provider sent is text; a batches.json that
// does not read is a problem naming it, and the rest of the page is shown.
func TestViewRunPageShowsTheBatches(t *testing.T) {
	v := makeViewDir(t, sink.FormatJSONL)
	ledger := `{"version": 1, "run": "3f2a", "batches": [
  {"number": 1, "state": "collected", "requests": 100, "bytes": 35939, "batch_id": "batch_aa", "status": "completed", "request_counts": {"total": 100, "completed": 98, "failed": 2}},
  {"number": 2, "state": "submitted", "requests": 37, "bytes": 9000, "batch_id": "batch_bb\"><script>alert(9)</script>", "status": "in_progress<img src=x onerror=alert(8)>", "request_counts": {"total": 37, "completed": 12, "failed": 0}},
  {"number": 3, "state": "intended", "requests": 5, "bytes": 800, "request_counts": {"total": 0, "completed": 0, "failed": 0}}]}`
	path := filepath.Join(v.dir, "batches.json")
	if err := os.WriteFile(path, []byte(ledger), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ts := serve(t, Options{Dirs: []string{v.dir}})
	_, body := get(t, nil, ts.URL+"/")
	_, table, ok := strings.Cut(body, `<table class="batches">`)
	if !ok {
		t.Fatalf("no batches table on the run page:\n%s", body)
	}
	table, _, _ = strings.Cut(table, "</table>")
	cells := regexp.MustCompile(`<td[^>]*>(.*?)</td>`)
	var rows [][]string
	for _, tr := range strings.Split(table, "<tr")[2:] {
		var row []string
		for _, m := range cells.FindAllStringSubmatch(tr, -1) {
			row = append(row, m[1])
		}
		rows = append(rows, row)
	}
	want := [][]string{
		{"1", "collected", "completed", "100", "98", "2", "<code>batch_aa</code>"},
		{"2", "submitted", "in_progress&lt;img src=x onerror=alert(8)&gt;", "37", "12", "0", "<code>batch_bb&#34;&gt;&lt;script&gt;alert(9)&lt;/script&gt;</code>"},
		{"3", "intended", "-", "5", "0", "0", "<code>-</code>"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("batches table rows:\n got %q\nwant %q", rows, want)
	}
	if m := hostileMarkup.FindString(body); m != "" {
		t.Errorf("the page holds %q unescaped", m)
	}

	if err := os.WriteFile(path, []byte(`{"version": 1, "run": "3f2a", "batches": [{"number": 2}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, nil, ts.URL+"/")
	if !strings.Contains(body, path+": batch 1 is out of order") || strings.Contains(body, `<table class="batches">`) {
		t.Errorf("a batches.json out of order: not said as a problem naming it, or a table shown anyway")
	}
	if !strings.Contains(body, `<table class="runs">`) {
		t.Error("a batches.json that does not read hid the rest of the run page")
	}
}

// TestViewFiguresSayWhose: a batch-mode run streams nothing, so its
// report.json writes ttft 0: the page says n/a, never "ttft p50 0"; a
// streamed run's time shows as a number. Every count or rate says whether
// it is the job's (earlier runs included) or this run's (issue 41).
func TestViewFiguresSayWhose(t *testing.T) {
	for _, tc := range []struct {
		ttft any
		want string
	}{{0, "n/a (no answer streamed)"}, {0.25, "0.25"}} {
		fs := Figures(map[string]any{"state": "done", "done": 20, "in_flight": 0, "ttft_p50_s": tc.ttft, "ttft_p90_s": tc.ttft})
		for _, f := range fs {
			if strings.HasPrefix(f.Key, "ttft_") && f.Value != tc.want {
				t.Errorf("%s %v reads %q, want %q", f.Key, tc.ttft, f.Value, tc.want)
			}
		}
		if len(fs) != 5 {
			t.Errorf("%d figures of 5: %+v", len(fs), fs)
		}
	}
	// What is neither the job's nor a run's: its state, its error, what
	// holds a slot now.
	whoseless := map[string]bool{"state": true, "error": true, "in_flight": true}
	for _, f := range figureKeys {
		if whoseless[f.key] {
			continue
		}
		if !strings.Contains(f.label, "job") && !strings.Contains(f.label, "this run") {
			t.Errorf("figure %s: label %q says neither the job's nor this run's", f.key, f.label)
		}
	}
}
