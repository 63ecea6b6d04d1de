package view

// The view's HTTP server: pages rendered by html/template (every byte of a
// record is escaped by it), the plots drawn in the browser by the vendored
// uPlot from the JSON of /api/history and /api/dist, and a
// Content-Security-Policy that allows no script but the server's own files.
// The server only reads: every route is GET (or HEAD).

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows scripts, styles and requests only from the
// server itself: no inline script (a record's <script> or onerror= cannot
// run even if it reached the page unescaped), no frames, no forms
// elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// tokenCookie holds the token once a URL with it was opened.
const tokenCookie = "synthgen_view_token"

// Options configure a Server.
type Options struct {
	Dirs []string
	// Token, when set, is required by every request: as ?token= (which
	// sets a cookie) or the cookie. For a server on a non-loopback address.
	Token string
	// Hosts, when set, are the only Host headers answered (the listening
	// address by its names): a web page elsewhere cannot reach a loopback
	// server through a name of its own that resolves to 127.0.0.1.
	Hosts []string
	// RefreshEvery bounds how often a request reads what a live run added
	// (default 2 s).
	RefreshEvery time.Duration
	// SearchLimit caps a text search's matches (default 200).
	SearchLimit int
}

// Server serves the view of a set of output directories.
type Server struct {
	opts  Options
	ix    *Index
	pages *template.Template
	mux   *http.ServeMux
}

var pageFuncs = template.FuncMap{
	"num":     fmtNum,
	"dur":     fmtDur,
	"pct":     func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "%" },
	"bytes":   func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) },
	"add":     func(a, b int) int { return a + b },
	"json":    prettyJSON,
	"ago":     func(t time.Time) string { return ago(t, time.Now()) },
	"figures": Figures,
	"utc":     utc,
	"chars":   utf8.RuneCountInString,
	"status": func(code int) string { // an error record's HTTP status; 0 when no answer had one (a schema failure, a timeout)
		if code == 0 {
			return "-"
		}
		return strconv.Itoa(code)
	},
	"recordURL":     recordURL,
	"promptPreview": promptPreview,
	"answerPreview": answerPreview,
	"toolCalls":     toolCallsOf,
	"tools":         toolsOf,
	"divergence":    divergenceText,
	"rowOf": func(r Row, dirs []DirInfo) tableRow {
		t := tableRow{Row: r, Multi: len(dirs) > 1}
		if r.Dir < len(dirs) {
			t.Dir = dirs[r.Dir].Path
		}
		return t
	},
}

// tableRow is a row of the records table.
type tableRow struct {
	Row   Row
	Multi bool   // several directories: a column says which
	Dir   string // the row's
}

// parsePages parses the page templates.
func parsePages() (*template.Template, error) {
	return template.New("").Funcs(pageFuncs).ParseFS(assets, "assets/*.html")
}

// NewServer prepares the view of o.Dirs; the index is built at the first
// request that needs it.
func NewServer(o Options) (*Server, error) {
	if len(o.Dirs) == 0 {
		return nil, errors.New("view: no directory")
	}
	for _, d := range o.Dirs {
		if err := CheckDir(d); err != nil {
			return nil, err
		}
	}
	if o.RefreshEvery <= 0 {
		o.RefreshEvery = 2 * time.Second
	}
	if o.SearchLimit <= 0 {
		o.SearchLimit = 200
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("view: templates: %w", err)
	}
	s := &Server{opts: o, ix: NewIndex(o.Dirs), pages: pages, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.runPage)
	s.mux.HandleFunc("GET /records", s.recordsPage)
	s.mux.HandleFunc("GET /record/{id...}", s.recordByPath)
	s.mux.HandleFunc("GET /record", s.recordByKey)
	s.mux.HandleFunc("GET /api/history", s.apiHistory)
	s.mux.HandleFunc("GET /api/dist", s.apiDist)
	s.mux.HandleFunc("GET /api/index", s.apiIndex)
	static, _ := fs.Sub(assets, "assets")
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", assetServer(static)))
	return s, nil
}

// Index is the server's index (tests and the static report read it).
func (s *Server) Index() *Index { return s.ix }

// Close releases the index.
func (s *Server) Close() { s.ix.Close() }

// assetServer serves the embedded files, never the templates.
func assetServer(static fs.FS) http.Handler {
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".html") || r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// ServeHTTP checks the host and the token, sets the headers every answer
// carries, and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if len(s.opts.Hosts) > 0 && !slices.Contains(s.opts.Hosts, strings.ToLower(r.Host)) {
		http.Error(w, "view: unknown host "+strconv.Quote(r.Host)+": open the address synthgen view printed", http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "view: read-only", http.StatusMethodNotAllowed)
		return
	}
	if s.opts.Token != "" {
		q := r.URL.Query()
		given := q.Get("token")
		if given != "" && subtle.ConstantTimeCompare([]byte(given), []byte(s.opts.Token)) == 1 {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.opts.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			// The same origin only: a path of leading slashes
			// ("//evil.com/") is another host to a browser.
			to := "/" + strings.TrimLeft(r.URL.EscapedPath(), "/")
			if len(q) > 0 {
				to += "?" + q.Encode()
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(tokenCookie)
		if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.opts.Token)) != 1 {
			http.Error(w, "view: the token is missing or wrong: open the URL synthgen view printed, with its ?token=", http.StatusUnauthorized)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// LoopbackHosts are the Host headers a loopback listener at addr answers
// to: its address, and localhost with its port.
func LoopbackHosts(addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := strconv.Itoa(tcp.Port)
	hosts := []string{net.JoinHostPort(tcp.IP.String(), port), net.JoinHostPort("localhost", port)}
	if tcp.IP.To4() != nil {
		hosts = append(hosts, net.JoinHostPort("127.0.0.1", port))
	} else {
		hosts = append(hosts, net.JoinHostPort("::1", port))
	}
	return hosts
}

// refresh brings the index up to date with a live run, at most every
// RefreshEvery; a failure is shown with the index's problems, not fatal.
func (s *Server) refresh() { _ = s.ix.Refresh(s.opts.RefreshEvery) }

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.pages.ExecuteTemplate(w, name, data); err != nil {
		// The page is half written: say it at its end.
		fmt.Fprintf(w, "\n<p class=\"problem\">%s</p>\n", template.HTMLEscapeString(err.Error()))
	}
}

func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, err.Error(), code)
}

// page is what every page template gets.
type page struct {
	Title    string
	Static   bool
	Refresh  bool // reload every second (the records page while the index is built)
	Dirs     []DirInfo
	Progress Progress
	Problems []string
	Segments []SegmentProblem
	Now      time.Time
}

// SegmentProblem is a part with lines that did not read.
type SegmentProblem struct {
	Dir, Part, Problem string
	Bad                int
}

func (s *Server) dirs() []DirInfo {
	out := make([]DirInfo, len(s.opts.Dirs))
	for i, d := range s.opts.Dirs {
		out[i] = readDir(i, d)
	}
	return out
}

func (s *Server) basePage(title string) page {
	p := page{Title: title, Dirs: s.dirs(), Progress: s.ix.Progress(), Now: time.Now()}
	p.Segments = s.ix.Problems()
	return p
}

// Problems are the parts with lines that did not read.
func (ix *Index) Problems() []SegmentProblem {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []SegmentProblem
	for _, seg := range ix.segs {
		if seg.problem != "" && !seg.dead {
			out = append(out, SegmentProblem{Dir: ix.dirs[seg.dir], Part: seg.name, Problem: seg.problem, Bad: seg.bad})
		}
	}
	return out
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	s.ix.Start()
	s.refresh()
	s.render(w, "run.html", s.basePage("run"))
}

func (s *Server) apiIndex(w http.ResponseWriter, r *http.Request) {
	s.ix.Start()
	writeJSON(w, http.StatusOK, s.ix.Progress())
}

func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	d, err := strconv.Atoi(r.URL.Query().Get("dir"))
	if err != nil || d < 0 || d >= len(s.opts.Dirs) {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("view: dir must be 0..%d", len(s.opts.Dirs)-1))
		return
	}
	h, err := ReadHistory(s.opts.Dirs[d])
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// maxTokens is the first directory's generation.max_tokens, 0 when no
// manifest says.
func (s *Server) maxTokens() int {
	for i, d := range s.opts.Dirs {
		if info := readDir(i, d); info.Job != nil {
			return info.Job.Sampling.MaxTokens
		}
	}
	return 0
}

func (s *Server) apiDist(w http.ResponseWriter, r *http.Request) {
	s.ix.Start()
	if !s.ix.Ready() {
		writeJSON(w, http.StatusAccepted, s.ix.Progress())
		return
	}
	s.refresh()
	writeJSON(w, http.StatusOK, s.ix.Dist(s.maxTokens()))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// perPage bounds the rows of a page of the table.
const (
	defaultPerPage = 50
	maxPerPage     = 500
)

// recordsView is the records page's data.
type recordsView struct {
	page
	Q        Query
	Form     url.Values
	Finishes []Count
	Sorts    []string
	Rows     []Row
	Total    int
	Page     int
	Pages    int
	PerPage  int
	First    int // 1-based number of the first row shown
	Prev     string
	Next     string
	Last     string
	FirstURL string
	Error    string
	Limit    int // search: the cap
}

// parseQuery reads the table's query from a URL's form.
func parseQuery(v url.Values, dirs int) (Query, error) {
	q := AnyQuery
	on := func(k string) bool { return v.Get(k) == "1" || v.Get(k) == "on" }
	q.Truncated, q.NoReasoning, q.ThinkTags, q.Errors = on("truncated"), on("no_reasoning"), on("think_tags"), on("errors")
	q.ToolCalls, q.Diverged, q.Desc = on("tool_calls"), on("diverged"), on("desc")
	q.Finish = v.Get("finish")
	q.Text = strings.TrimSpace(v.Get("q"))
	if len(q.Text) > 200 {
		return q, errors.New("the search is longer than 200 bytes")
	}
	q.Sort = v.Get("sort")
	if !slices.Contains(Sorts, q.Sort) {
		return q, fmt.Errorf("sort %q: one of %s", q.Sort, strings.Join(Sorts[1:], ", "))
	}
	for _, b := range []struct {
		key string
		to  *int
	}{{"min_tokens", &q.MinTokens}, {"max_tokens", &q.MaxTokens}} {
		if s := strings.TrimSpace(v.Get(b.key)); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return q, fmt.Errorf("%s %q: a whole number of tokens", b.key, s)
			}
			*b.to = n
		}
	}
	if s := v.Get("dir"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= dirs {
			return q, fmt.Errorf("dir %q: 0..%d", s, dirs-1)
		}
		q.Dir = n
	}
	return q, nil
}

func (s *Server) recordsPage(w http.ResponseWriter, r *http.Request) {
	s.ix.Start()
	form := r.URL.Query()
	v := recordsView{page: s.basePage("records"), Form: form, Sorts: Sorts[1:]}
	q, err := parseQuery(form, len(s.opts.Dirs))
	v.Q = q
	if err != nil {
		v.Error = err.Error()
		w.WriteHeader(http.StatusBadRequest)
		s.render(w, "records.html", v)
		return
	}
	if !s.ix.Ready() {
		v.Refresh = true
		s.render(w, "records.html", v)
		return
	}
	s.refresh()
	v.Progress = s.ix.Progress()
	v.Finishes = s.ix.Finishes()
	if q.Text != "" {
		s.search(w, r, v)
		return
	}
	pos := s.ix.Select(q)
	v.Total = len(pos)
	v.PerPage = defaultPerPage
	if n, err := strconv.Atoi(form.Get("per")); err == nil && n > 0 {
		v.PerPage = min(n, maxPerPage)
	}
	v.Pages = max(1, (v.Total+v.PerPage-1)/v.PerPage)
	if n, err := strconv.Atoi(form.Get("page")); err == nil && n > 0 {
		v.Page = min(n-1, v.Pages-1)
	}
	from := v.Page * v.PerPage
	to := min(from+v.PerPage, v.Total)
	v.First = from + 1
	at := func(p int) string {
		f := url.Values{}
		for k, vals := range form {
			f[k] = vals
		}
		f.Set("page", strconv.Itoa(p+1))
		return "/records?" + f.Encode()
	}
	if v.Page > 0 {
		v.Prev, v.FirstURL = at(v.Page-1), at(0)
	}
	if v.Page < v.Pages-1 {
		v.Next, v.Last = at(v.Page+1), at(v.Pages-1)
	}
	if from < to {
		rows, err := s.ix.Rows(pos[from:to])
		if err != nil {
			v.Error = err.Error()
		}
		v.Rows = rows
	}
	s.render(w, "records.html", v)
}

// search streams the matches of v.Q's text as they are found: the page's
// head first, then each match, flushed, then how many were read.
func (s *Server) search(w http.ResponseWriter, r *http.Request, v recordsView) {
	v.Limit = s.opts.SearchLimit
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if err := s.pages.ExecuteTemplate(w, "search_head", v); err != nil {
		return
	}
	flush()
	found := 0
	last := time.Now()
	read, err := s.ix.Search(r.Context(), v.Q, v.Limit, func(m Match) error {
		found++
		if err := s.pages.ExecuteTemplate(w, "search_match", m); err != nil {
			return err
		}
		flush()
		return nil
	}, func(read, total int) error {
		if time.Since(last) < 250*time.Millisecond {
			return nil
		}
		last = time.Now()
		err := s.pages.ExecuteTemplate(w, "search_progress", map[string]int{"Read": read, "Total": total, "Found": found})
		flush()
		return err
	})
	if errors.Is(err, context.Canceled) {
		return
	}
	end := map[string]any{"Read": read, "Total": len(s.ix.Select(v.Q)), "Found": found, "Limit": v.Limit, "Error": ""}
	if err != nil {
		end["Error"] = err.Error()
	}
	_ = s.pages.ExecuteTemplate(w, "search_end", end)
}

// fmtNum writes an integer n with groups of three digits (1,234,567),
// anything else as fmt does.
func fmtNum(n any) string {
	switch n.(type) {
	case int, int32, int64:
		return message.NewPrinter(language.English).Sprintf("%d", n)
	}
	return fmt.Sprint(n)
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + " ms"
	default:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	}
}

func prettyJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
