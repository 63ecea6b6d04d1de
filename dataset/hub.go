package dataset

// This file reads datasets straight from the Hugging Face Hub. A path of the
// form
//
//	hf://owner/name[@revision][/path-or-glob]
//
// is resolved through the Hub's HTTP API to one commit, its files are
// downloaded once into a local cache, and the Reader reads the cached files
// like a local glob. The Hub endpoints used are the ones huggingface_hub uses:
//
//	GET {HF_ENDPOINT}/api/datasets/{owner}/{name}/revision/{revision}   → {"sha": ...}
//	GET {HF_ENDPOINT}/api/datasets/{owner}/{name}/tree/{sha}?recursive=true
//	    → [{"type":"file","path":...,"size":...,"oid":<git sha1>,"lfs":{"oid":<sha256>,"size":...}}, ...]
//	    paginated with a Link: <...>; rel="next" header
//	GET {HF_ENDPOINT}/datasets/{owner}/{name}/resolve/{sha}/{path}      → the bytes, after a redirect to a CDN

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/durable"
)

const (
	hubScheme          = "hf://"
	defaultHubEndpoint = "https://huggingface.co"
	defaultRevision    = "main"
)

// Errors a caller can tell apart with errors.Is, e.g. to choose a hint. The
// messages that wrap them already say what to do.
var (
	// ErrHubUnreachable: the Hub could not be reached and the cache could
	// not stand in for it.
	ErrHubUnreachable = errors.New("hugging face hub unreachable")
	// ErrHubAccess: the Hub refused the request (401/403): a gated or
	// private dataset, or a token without access.
	ErrHubAccess = errors.New("gated or private dataset")
	// ErrHubNotFound: no such dataset, revision or file (404).
	ErrHubNotFound = errors.New("not found on the hugging face hub")
)

// hubError is an error with an exact message for a person and a kind for
// errors.Is.
type hubError struct {
	kind  error
	msg   string
	cause error
}

func (e *hubError) Error() string        { return e.msg }
func (e *hubError) Is(target error) bool { return target == e.kind }
func (e *hubError) Unwrap() error        { return e.cause }

// isHubPath reports whether a dataset path names a Hub dataset.
func isHubPath(p string) bool { return strings.HasPrefix(p, hubScheme) }

// Identity names exactly the data that Options.Path reads, so that a run's
// manifest can record it and a resume can tell whether the data moved.
//
// For hf:// paths it resolves the revision (a branch or tag; main when none
// is given) to its commit and returns the pinned path
// "hf://owner/name@<40-hex sha>[/path-or-glob]". That string is itself a valid
// Options.Path that reads the same files in the same order, with no network
// once they are cached: set Options.Path to it before Count and Open so both
// read one commit even if the branch moves meanwhile, and store it so that a
// resume reads what the first run read. When the Hub cannot be reached, the
// commit the revision had when it was last resolved on this machine is used.
//
// Local paths have no revision: Identity returns them unchanged (their
// contents are not hashed).
func Identity(opts Options) (string, error) {
	if !isHubPath(opts.Path) {
		return opts.Path, nil
	}
	ref, err := parseHubPath(opts.Path)
	if err != nil {
		return "", err
	}
	c, err := newHubClient(opts.Context, opts.OnDownload)
	if err != nil {
		return "", err
	}
	sha, err := c.commit(ref)
	if err != nil {
		return "", err
	}
	ref.rev = sha
	return ref.String(), nil
}

// fetcher makes sure the file at a path that resolveFiles returned is on
// disk; nil for local datasets.
type fetcher func(path string) error

// resolveFiles turns Options.Path into the files to read in order, and for
// hf:// paths a fetcher that downloads each one when it is first needed:
// Open downloads only the files it reaches, and Count only those it counts
// before Limit.
func resolveFiles(o Options) ([]string, fetcher, error) {
	if !isHubPath(o.Path) {
		files, err := resolve(o.Path)
		return files, nil, err
	}
	ref, err := parseHubPath(o.Path)
	if err != nil {
		return nil, nil, err
	}
	c, err := newHubClient(o.Context, o.OnDownload)
	if err != nil {
		return nil, nil, err
	}
	sha, err := c.commit(ref)
	if err != nil {
		return nil, nil, err
	}
	listing, err := c.tree(ref, sha)
	if err != nil {
		return nil, nil, err
	}
	pinned := hubRef{repo: ref.repo, rev: sha, path: ref.path}
	// Messages name the path as the user wrote it; the files are the
	// commit's.
	sel, err := selectHubFiles(ref, listing)
	if err != nil {
		return nil, nil, err
	}
	byPath := make(map[string]hubFile, len(sel))
	paths := make([]string, len(sel))
	for i, f := range sel {
		paths[i] = c.localPath(ref.repo, sha, f.Path)
		byPath[paths[i]] = f
	}
	fetch := func(p string) error {
		f, ok := byPath[p]
		if !ok {
			return fmt.Errorf("dataset %s: %s is not one of its files", pinned, p)
		}
		return c.fetch(pinned, f)
	}
	return paths, fetch, nil
}

// hubRef is a parsed hf:// path.
type hubRef struct {
	repo string // "owner/name"
	rev  string // branch, tag or commit; "" means main
	path string // file, folder or glob inside the repo; "" selects by default
}

// String is the canonical hf:// form, which parseHubPath reads back.
func (r hubRef) String() string {
	s := hubScheme + r.repo
	if r.rev != "" {
		if isRefsRevision(r.rev) {
			s += "@" + r.rev
		} else {
			s += "@" + url.PathEscape(r.rev)
		}
	}
	if r.path != "" {
		s += "/" + r.path
	}
	return s
}

// isRefsRevision reports whether rev is one of the Hub's refs/KIND/NAME
// revisions (refs/pr/1, refs/convert/parquet), written with its slashes.
func isRefsRevision(rev string) bool {
	parts := strings.Split(rev, "/")
	return len(parts) == 3 && parts[0] == "refs" && parts[1] != "" && parts[2] != ""
}

func (r hubRef) revision() string {
	if r.rev == "" {
		return defaultRevision
	}
	return r.rev
}

// hubNameRE is what the Hub allows in an owner or a dataset name; it also
// keeps both safe as path elements of the cache.
var hubNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// parseHubPath reads hf://owner/name[@revision][/path]. The "datasets/"
// prefix of huggingface_hub's HfFileSystem URLs (hf://datasets/owner/name) is
// accepted. A revision ends at the next "/", except the Hub's refs/pr/N and
// refs/convert/parquet, which are taken whole; it may also be percent-encoded
// (refs%2Fpr%2F1).
func parseHubPath(p string) (hubRef, error) {
	bad := func(why string) (hubRef, error) {
		return hubRef{}, fmt.Errorf("dataset path %q: %s; want hf://owner/name[@revision][/path or glob]", p, why)
	}
	rest, ok := strings.CutPrefix(p, hubScheme)
	if !ok {
		return bad("not an hf:// path")
	}
	if r, ok := strings.CutPrefix(rest, "datasets/"); ok && strings.Count(r, "/") >= 1 {
		rest = r
	}
	owner, rest, _ := strings.Cut(rest, "/")
	nameRev, sub, _ := strings.Cut(rest, "/")
	name, rev, hasRev := strings.Cut(nameRev, "@")
	if !hubNameRE.MatchString(owner) || !hubNameRE.MatchString(name) {
		return bad("owner and name must be letters, digits, '-', '_' or '.'")
	}
	if hasRev {
		if rev == "refs" {
			parts := strings.SplitN(sub, "/", 3)
			if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
				return bad("revision refs/... needs two more parts, as in refs/pr/1")
			}
			rev = "refs/" + parts[0] + "/" + parts[1]
			sub = ""
			if len(parts) == 3 {
				sub = parts[2]
			}
		} else if u, err := url.PathUnescape(rev); err == nil {
			rev = u
		}
		if rev == "" || rev == "." || strings.Contains(rev, "..") || strings.ContainsFunc(rev, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\\'
		}) {
			return bad("empty or malformed revision")
		}
	}
	sub = strings.Trim(sub, "/")
	if sub != "" {
		clean := path.Clean(sub)
		if clean != sub || !filepath.IsLocal(filepath.FromSlash(clean)) || strings.Contains(sub, "\\") {
			return bad("path inside the dataset must be relative, without . or .. parts")
		}
	}
	return hubRef{repo: owner + "/" + name, rev: rev, path: sub}, nil
}

// isCommitSHA reports whether a revision is already a commit id.
func isCommitSHA(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	_, err := hex.DecodeString(rev)
	return err == nil
}

// hubSettings are read from the environment variables huggingface_hub reads,
// so that a machine set up for it works the same.
type hubSettings struct {
	endpoint string // HF_ENDPOINT without a trailing slash
	host     string // the endpoint's host: the token goes nowhere else
	token    string // HF_TOKEN; never logged or put in an error
	offline  bool   // HF_HUB_OFFLINE: cache only
	cacheDir string // SYNTHGEN_CACHE_DIR, else $HF_HOME/synthgen, else the user cache dir/synthgen
}

func hubSettingsFromEnv() (hubSettings, error) {
	var s hubSettings
	s.endpoint = strings.TrimRight(strings.TrimSpace(os.Getenv("HF_ENDPOINT")), "/")
	if s.endpoint == "" {
		s.endpoint = defaultHubEndpoint
	}
	u, err := url.Parse(s.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return s, fmt.Errorf("HF_ENDPOINT %q: want a URL such as %s", s.endpoint, defaultHubEndpoint)
	}
	s.host = u.Host
	s.token = strings.TrimSpace(os.Getenv("HF_TOKEN"))
	switch strings.ToLower(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))) {
	case "1", "true", "yes", "on":
		s.offline = true
	}
	switch {
	case os.Getenv("SYNTHGEN_CACHE_DIR") != "":
		s.cacheDir = os.Getenv("SYNTHGEN_CACHE_DIR")
	case os.Getenv("HF_HOME") != "":
		s.cacheDir = filepath.Join(os.Getenv("HF_HOME"), "synthgen")
	default:
		dir, err := os.UserCacheDir()
		if err != nil {
			return s, fmt.Errorf("no cache directory for hf:// datasets (%w): set SYNTHGEN_CACHE_DIR", err)
		}
		s.cacheDir = filepath.Join(dir, "synthgen")
	}
	return s, nil
}

// The network's knobs, variables so tests can shorten them.
var (
	// hubAttempts is how many times a download is tried (resuming where
	// the last try stopped), and an API call that got 429 or 5xx.
	hubAttempts = 4
	// hubRetryDelay is the first pause between tries; it doubles, up to
	// hubMaxRetryDelay.
	hubRetryDelay    = time.Second
	hubMaxRetryDelay = time.Minute
	// hubIdleTimeout ends a download that received nothing for this long,
	// so a stalled connection is retried instead of hanging the start.
	hubIdleTimeout = 2 * time.Minute
	// hubAPITimeout bounds one API call (one page of a listing).
	hubAPITimeout = 2 * time.Minute
)

// hubHTTP is shared so that connections are reused across files and calls.
var hubHTTP = &http.Client{
	Transport: hubTransport(),
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		// The CDN URLs the Hub redirects to are signed: the token is of
		// no use there, and some storage backends refuse a request that
		// carries a second kind of credentials. It must not leave the Hub.
		if req.URL.Host != via[0].URL.Host {
			req.Header.Del("Authorization")
		}
		return nil
	},
}

func hubTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone() // keeps proxies from the environment: GPU clusters often need them
	t.ResponseHeaderTimeout = time.Minute
	return t
}

// hubClient talks to one Hub endpoint and keeps its files in the cache:
//
//	CACHE/datasets/OWNER/NAME/refs/REVISION      the commit a branch or tag had when last resolved
//	CACHE/datasets/OWNER/NAME/trees/SHA.json     the commit's file list (a commit never changes)
//	CACHE/datasets/OWNER/NAME/SHA/PATH           the files, under their final name only when complete and verified
//	CACHE/datasets/OWNER/NAME/SHA/PATH.incomplete a download in progress, resumed by the next try
type hubClient struct {
	hubSettings
	ctx        context.Context // the caller's: ends every request and wait
	onDownload func(file string, done, total int64)
}

func newHubClient(ctx context.Context, onDownload func(file string, done, total int64)) (*hubClient, error) {
	s, err := hubSettingsFromEnv()
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return &hubClient{hubSettings: s, ctx: ctx, onDownload: onDownload}, nil
}

// pause waits between a failed try and the next, the retry-th (1-based),
// or less when the caller gives up. One client retries alone, so the waits
// double without jitter.
func (c *hubClient) pause(retry int) {
	p := backoff.Policy{Initial: hubRetryDelay, Max: hubMaxRetryDelay}
	backoff.Sleep(c.ctx, p.Ceiling(retry))
}

func (c *hubClient) repoDir(repo string) string {
	return filepath.Join(c.cacheDir, "datasets", filepath.FromSlash(repo))
}

func (c *hubClient) localPath(repo, sha, file string) string {
	return filepath.Join(c.repoDir(repo), sha, filepath.FromSlash(file))
}

// request builds a GET, with the token only when it goes to the endpoint.
func (c *hubClient) request(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "synthgen")
	if c.token != "" && req.URL.Host == c.host {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends req; a failure to get any answer is ErrHubUnreachable.
func (c *hubClient) do(ref hubRef, req *http.Request) (*http.Response, error) {
	resp, err := hubHTTP.Do(req)
	if err != nil {
		what := "cannot reach HF_ENDPOINT " + c.endpoint
		var ue *url.Error
		if errors.As(err, &ue) {
			if u, perr := url.Parse(ue.URL); perr == nil && u.Host != c.host {
				// A redirect to the Hub's file servers failed, not
				// the Hub itself: often a proxy or firewall rule.
				what = "cannot reach " + u.Host + ", where HF_ENDPOINT " + c.endpoint + " keeps the files"
			}
		}
		return nil, &hubError{
			kind: ErrHubUnreachable,
			msg: fmt.Sprintf("%s: %s (%v): download the files and point dataset.path at them, or set HF_ENDPOINT to a reachable mirror",
				ref, what, redact(err)),
			cause: err,
		}
	}
	return resp, nil
}

// redact drops the query of a URL in an error: CDN URLs carry signatures.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.RawQuery != "" {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String() + "?…", Err: ue.Err}
		}
	}
	return err
}

// transient reports whether an HTTP status is worth another try.
func transient(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// getAPI fetches one API document, retrying 429 and 5xx answers. It returns
// the body and the URL of the next page from the Link header, if any.
func (c *hubClient) getAPI(ref hubRef, u string) (body []byte, next string, err error) {
	for attempt := 1; ; attempt++ {
		body, next, status, err := c.getAPIOnce(ref, u)
		if err == nil || !transient(status) || attempt >= hubAttempts || c.ctx.Err() != nil {
			return body, next, err
		}
		c.pause(attempt)
	}
}

func (c *hubClient) getAPIOnce(ref hubRef, u string) ([]byte, string, int, error) {
	ctx, cancel := context.WithTimeout(c.ctx, hubAPITimeout)
	defer cancel()
	req, err := c.request(ctx, u)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%s: %w", ref, err)
	}
	resp, err := c.do(ref, req)
	if err != nil {
		return nil, "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", resp.StatusCode, c.statusError(ref, resp)
	}
	// A listing of a very large repository is paginated, so one page is
	// small; the bound keeps a wrong endpoint from filling memory.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, "", 0, &hubError{kind: ErrHubUnreachable, cause: err,
			msg: fmt.Sprintf("%s: reading %s: %v", ref, req.URL.Path, err)}
	}
	next, err := nextLink(resp.Header.Values("Link"), resp.Request.URL)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%s: %s: %w", ref, req.URL.Path, err)
	}
	return body, next, 0, nil
}

// nextLink reads rel="next" from Link headers (RFC 8288), resolved against
// the URL of the page.
func nextLink(values []string, base *url.URL) (string, error) {
	for _, v := range values {
		for _, link := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(link), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			isNext := false
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && strings.Trim(v, `"`) == "next" {
					isNext = true
				}
			}
			if !isNext {
				continue
			}
			u, err := base.Parse(strings.Trim(target, "<>"))
			if err != nil {
				return "", fmt.Errorf("bad Link header: %w", err)
			}
			return u.String(), nil
		}
	}
	return "", nil
}

// statusError turns a refusal into a message that says what to do. The Hub
// names the cause in X-Error-Code (RepoNotFound, RevisionNotFound,
// EntryNotFound, GatedRepo) and answers 401, not 404, for a dataset that does
// not exist when no token is sent, so that private names do not leak.
func (c *hubClient) statusError(ref hubRef, resp *http.Response) error {
	code := resp.Header.Get("X-Error-Code")
	said := resp.Header.Get("X-Error-Message")
	if said == "" {
		var body struct {
			Error string `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if json.Unmarshal(b, &body) == nil {
			said = body.Error
		}
	}
	answered := "the Hub answered " + resp.Status
	if said != "" {
		answered += " (" + said + ")"
	}
	repo := ref.repo
	page := c.endpoint + "/datasets/" + repo
	e := &hubError{}
	switch {
	case code == "RevisionNotFound":
		e.kind = ErrHubNotFound
		e.msg = fmt.Sprintf("%s: no dataset %s at revision %s: %s; check the branch, tag or commit at %s/tree/%s",
			ref, repo, ref.revision(), answered, page, defaultRevision)
	case code == "EntryNotFound":
		e.kind = ErrHubNotFound
		e.msg = fmt.Sprintf("%s: no such file at revision %s: %s", ref, ref.revision(), answered)
	case code == "GatedRepo":
		e.kind = ErrHubAccess
		e.msg = fmt.Sprintf("%s: gated or private dataset: %s; accept its conditions at %s while logged in, then set HF_TOKEN to a token of that account",
			ref, answered, page)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.kind = ErrHubAccess
		if c.token == "" {
			e.msg = fmt.Sprintf("%s: gated or private dataset, or no dataset %s: %s; set HF_TOKEN to a token that can read it, and check the name at %s",
				ref, repo, answered, page)
		} else {
			e.msg = fmt.Sprintf("%s: gated or private dataset, or no dataset %s: %s with the token in HF_TOKEN; check that the token can read it and the name at %s",
				ref, repo, answered, page)
		}
	case resp.StatusCode == http.StatusNotFound:
		e.kind = ErrHubNotFound
		e.msg = fmt.Sprintf("%s: no dataset %s at revision %s: %s; check the name at %s", ref, repo, ref.revision(), answered, page)
	default:
		e.msg = fmt.Sprintf("%s: %s %s: %s", ref, resp.Request.Method, resp.Request.URL.Path, answered)
	}
	return e
}

// commit resolves the ref's revision to a commit id and remembers it, so
// that when the Hub cannot be reached later the cache can still be used.
func (c *hubClient) commit(ref hubRef) (string, error) {
	if isCommitSHA(ref.rev) {
		return strings.ToLower(ref.rev), nil
	}
	refFile := filepath.Join(c.repoDir(ref.repo), "refs", url.PathEscape(ref.revision()))
	cached := func() (string, bool) {
		b, err := os.ReadFile(refFile)
		sha := strings.TrimSpace(string(b))
		return sha, err == nil && isCommitSHA(sha)
	}
	if c.offline {
		if sha, ok := cached(); ok {
			return sha, nil
		}
		return "", &hubError{kind: ErrHubUnreachable, msg: fmt.Sprintf(
			"%s: HF_HUB_OFFLINE is set and revision %s was never resolved on this machine (cache %s): unset it, or give the commit as hf://%s@<sha>",
			ref, ref.revision(), c.cacheDir, ref.repo)}
	}
	u := c.endpoint + "/api/datasets/" + ref.repo + "/revision/" + url.PathEscape(ref.revision())
	body, _, err := c.getAPI(ref, u)
	if err != nil {
		if sha, ok := cached(); ok && errors.Is(err, ErrHubUnreachable) {
			return sha, nil
		}
		return "", err
	}
	var info struct {
		SHA string `json:"sha"`
	}
	if err := json.Unmarshal(body, &info); err != nil || !isCommitSHA(info.SHA) {
		return "", fmt.Errorf("%s: %s answered no commit sha for revision %s (is HF_ENDPOINT a Hub?)", ref, c.endpoint, ref.revision())
	}
	sha := strings.ToLower(info.SHA)
	if err := writeCacheFile(refFile, []byte(sha+"\n")); err != nil {
		return "", fmt.Errorf("%s: cache: %w", ref, err)
	}
	return sha, nil
}

// hubFile is one file of a commit, as the tree API lists it.
type hubFile struct {
	Path string  `json:"path"`
	Size int64   `json:"size"`
	OID  string  `json:"oid"` // the git blob id: sha1 of "blob SIZE\0" + content
	LFS  *hubLFS `json:"lfs,omitempty"`
}

// hubLFS describes a file stored in LFS (or Xet): OID is the sha256 of its
// content.
type hubLFS struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

func (f hubFile) size() int64 {
	if f.LFS != nil {
		return f.LFS.Size
	}
	return f.Size
}

// decodeTreePage reads one page of the tree API and keeps its files. A path
// that could leave the cache directory or a negative size is an error: the
// listing decides where files are written.
func decodeTreePage(data []byte) ([]hubFile, error) {
	var entries []struct {
		Type string `json:"type"`
		hubFile
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("tree listing: %w", err)
	}
	var files []hubFile
	for i, e := range entries {
		if e.Type != "file" {
			continue
		}
		p := e.Path
		if p == "" || path.Clean(p) != p || !filepath.IsLocal(filepath.FromSlash(p)) || strings.ContainsAny(p, "\\\x00") {
			return nil, fmt.Errorf("tree listing: entry %d: path %q: not a relative path", i, p)
		}
		if e.Size < 0 || (e.LFS != nil && e.LFS.Size < 0) {
			return nil, fmt.Errorf("tree listing: entry %d: %s: negative size", i, p)
		}
		files = append(files, e.hubFile)
	}
	return files, nil
}

// tree lists the files of a commit, from the cache when it was listed
// before: a commit's files never change.
func (c *hubClient) tree(ref hubRef, sha string) ([]hubFile, error) {
	cache := filepath.Join(c.repoDir(ref.repo), "trees", sha+".json")
	if b, err := os.ReadFile(cache); err == nil {
		var files []hubFile
		if err := json.Unmarshal(b, &files); err == nil {
			return files, nil
		}
	}
	pinned := hubRef{repo: ref.repo, rev: sha, path: ref.path}
	if c.offline {
		return nil, &hubError{kind: ErrHubUnreachable, msg: fmt.Sprintf(
			"%s: HF_HUB_OFFLINE is set and this commit's file list is not in the cache %s", pinned, c.cacheDir)}
	}
	var files []hubFile
	seen := map[string]bool{}
	for u := c.endpoint + "/api/datasets/" + ref.repo + "/tree/" + sha + "?recursive=true&expand=false"; u != ""; {
		if seen[u] {
			return nil, fmt.Errorf("%s: tree listing: the page %s links to itself", pinned, u)
		}
		seen[u] = true
		body, next, err := c.getAPI(pinned, u)
		if err != nil {
			return nil, err
		}
		page, err := decodeTreePage(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pinned, err)
		}
		files = append(files, page...)
		u = next
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	b, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	if err := writeCacheFile(cache, b); err != nil {
		return nil, fmt.Errorf("%s: cache: %w", pinned, err)
	}
	return files, nil
}

// Default selection. Without a path after the name, the files read are:
//  1. the files whose type the reader supports (.parquet, .jsonl, .ndjson,
//     .json, and .gz/.zst of the JSON ones), leaving out hidden paths and the
//     metadata files of the datasets library (dataset_info.json, ...);
//  2. of those, the ones under data/ when there are any (the Hub's layout);
//  3. grouped by split, read from the path as the datasets library does
//     (train, validation/valid/val/dev, test/eval, as a word between - _ . /
//     or digits): one group is taken whole; several are narrowed to train
//     when every file has a split;
//  4. what remains must be all Parquet or all JSON.
//
// Anything else is ambiguous: the error lists what was found and suggests a
// glob. A path naming a folder applies the same rules inside it; a file is
// read alone; a glob (* ? [ ], not crossing /) reads what it matches.

// hubMetadataFiles are JSON files the datasets library writes next to data.
var hubMetadataFiles = map[string]bool{
	"dataset_info.json": true, "dataset_infos.json": true, "dataset_dict.json": true, "state.json": true,
}

var hubSplitWords = map[string]string{
	"train": "train", "training": "train",
	"validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
	"test": "test", "testing": "test", "eval": "test", "evaluation": "test",
}

// splitOf is the split a path names, "" when none.
func splitOf(p string) string {
	p = strings.ToLower(p)
	words := strings.FieldsFunc(p, func(r rune) bool {
		return r == '-' || r == '_' || r == '.' || r == ' ' || r == '/' || unicode.IsDigit(r)
	})
	for _, w := range words {
		if s, ok := hubSplitWords[w]; ok {
			return s
		}
	}
	return ""
}

// selectHubFiles picks the files ref reads among a commit's files, in path
// order.
func selectHubFiles(ref hubRef, files []hubFile) ([]hubFile, error) {
	var sel []hubFile
	switch {
	case ref.path == "":
		var err error
		if sel, err = defaultSelection(ref, "", files); err != nil {
			return nil, err
		}
	case strings.ContainsAny(ref.path, "*?["):
		if _, err := path.Match(ref.path, ""); err != nil {
			return nil, fmt.Errorf("dataset %s: bad glob: %w", ref, err)
		}
		for _, f := range files {
			if ok, _ := path.Match(ref.path, f.Path); ok {
				sel = append(sel, f)
			}
		}
		if len(sel) == 0 {
			return nil, fmt.Errorf("dataset %s: no files match; the dataset has %s", ref, listFiles(files, 20))
		}
	default:
		prefix := ref.path + "/"
		var under []hubFile
		for _, f := range files {
			if f.Path == ref.path {
				sel = []hubFile{f}
				break
			}
			if strings.HasPrefix(f.Path, prefix) {
				under = append(under, f)
			}
		}
		if sel == nil && under == nil {
			return nil, fmt.Errorf("dataset %s: no file or folder %s; the dataset has %s", ref, ref.path, listFiles(files, 20))
		}
		if sel == nil {
			var err error
			if sel, err = defaultSelection(ref, prefix, under); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range sel {
		if _, _, err := fileType(f.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
	}
	sort.Slice(sel, func(i, j int) bool { return sel[i].Path < sel[j].Path })
	return sel, nil
}

// defaultSelection applies the rules above to the files under prefix.
func defaultSelection(ref hubRef, prefix string, files []hubFile) ([]hubFile, error) {
	var data []hubFile
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, prefix)
		if strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.") || hubMetadataFiles[path.Base(rel)] {
			continue
		}
		if _, _, err := fileType(rel); err == nil {
			data = append(data, f)
		}
	}
	if len(data) == 0 {
		hint := ""
		for _, f := range files {
			if strings.HasSuffix(f.Path, ".py") {
				hint = fmt.Sprintf("; it looks like a dataset built by a script: the Hub's Parquet conversion may be at hf://%s@refs/convert/parquet", ref.repo)
				break
			}
		}
		return nil, fmt.Errorf("dataset %s: no .parquet, .jsonl or .json files; found %s%s", ref, listFiles(files, 20), hint)
	}
	var inData []hubFile
	for _, f := range data {
		if strings.HasPrefix(f.Path, prefix+"data/") {
			inData = append(inData, f)
		}
	}
	if len(inData) > 0 {
		data = inData
	}
	groups := map[string][]hubFile{}
	for _, f := range data {
		s := splitOf(strings.TrimPrefix(f.Path, prefix))
		groups[s] = append(groups[s], f)
	}
	sel := data
	if len(groups) > 1 {
		if train, ok := groups["train"]; ok && groups[""] == nil {
			sel = train
		} else {
			return nil, ambiguous(ref, groups, files)
		}
	}
	parquetFiles := 0
	for _, f := range sel {
		if k, _, _ := fileType(f.Path); k == kindParquet {
			parquetFiles++
		}
	}
	if parquetFiles != 0 && parquetFiles != len(sel) {
		byFormat := map[string][]hubFile{}
		for _, f := range sel {
			if k, _, _ := fileType(f.Path); k == kindParquet {
				byFormat["parquet"] = append(byFormat["parquet"], f)
			} else {
				byFormat["json"] = append(byFormat["json"], f)
			}
		}
		return nil, ambiguous(ref, byFormat, files)
	}
	return sel, nil
}

// ambiguous says which groups of files were found and suggests a glob for
// each that reads exactly that group.
func ambiguous(ref hubRef, groups map[string][]hubFile, all []hubFile) error {
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "dataset %s: cannot choose the files to read:", ref)
	var suggestions []string
	for i, k := range names {
		label := k
		if label == "" {
			label = "no split"
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s: %s", label, listFiles(groups[k], 5))
		if g := globFor(groups[k], all); g != "" {
			suggestions = append(suggestions, hubRef{repo: ref.repo, rev: ref.rev, path: g}.String())
		}
	}
	b.WriteString("; set dataset.path to name them")
	if len(suggestions) > 0 {
		b.WriteString(", e.g. " + strings.Join(suggestions, " or "))
	}
	return errors.New(b.String())
}

// globFor is a glob matching exactly group among all (the common folder,
// the common start of the names, then * and the common extension), or "".
func globFor(group, all []hubFile) string {
	if len(group) == 1 {
		return group[0].Path
	}
	dir, prefix, ext := path.Dir(group[0].Path), path.Base(group[0].Path), path.Ext(group[0].Path)
	for _, f := range group[1:] {
		if path.Dir(f.Path) != dir || path.Ext(f.Path) != ext {
			return ""
		}
		base := path.Base(f.Path)
		n := 0
		for n < len(prefix) && n < len(base) && prefix[n] == base[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if strings.ContainsAny(prefix, "*?[\\") {
		return ""
	}
	g := path.Join(dir, prefix+"*"+ext)
	matched := 0
	for _, f := range all {
		if ok, _ := path.Match(g, f.Path); ok {
			matched++
		}
	}
	if matched != len(group) {
		return ""
	}
	return g
}

// listFiles names up to max files with their sizes, for error messages.
func listFiles(files []hubFile, max int) string {
	if len(files) == 0 {
		return "no files"
	}
	var parts []string
	for i, f := range files {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(files)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", f.Path, byteSize(f.size())))
	}
	return strings.Join(parts, ", ")
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// fetch makes sure one file of the pinned commit is in the cache. A file
// under its final name was verified before it got that name, so its size is
// the only check: reading it needs no network.
func (c *hubClient) fetch(pinned hubRef, f hubFile) error {
	dst := c.localPath(pinned.repo, pinned.rev, f.Path)
	if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() && st.Size() == f.size() {
		return nil
	}
	name := hubRef{repo: pinned.repo, rev: pinned.rev, path: f.Path}
	if c.offline {
		return &hubError{kind: ErrHubUnreachable, msg: fmt.Sprintf(
			"%s: HF_HUB_OFFLINE is set and the file is not in the cache %s", name, c.cacheDir)}
	}
	if err := durable.MkdirAll(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("%s: cache: %w", name, err)
	}
	return c.download(name, f, dst)
}

// download fetches a file into dst.incomplete, resuming what an earlier try
// or run left there, verifies its size and checksum, and only then renames
// it to dst: a crash never leaves a file under dst that is not complete.
func (c *hubClient) download(name hubRef, f hubFile, dst string) error {
	part := dst + ".incomplete"
	u := c.endpoint + "/datasets/" + name.repo + "/resolve/" + name.rev + "/" + escapePath(f.Path)
	for fresh := false; ; fresh = true {
		resumed := false
		if st, err := os.Stat(part); err == nil && st.Size() > 0 {
			resumed = true
		}
		var err error
		for attempt := 1; attempt <= hubAttempts; attempt++ {
			if attempt > 1 {
				if c.ctx.Err() != nil {
					break
				}
				c.pause(attempt - 1)
			}
			var retry bool
			if retry, err = c.downloadOnce(name, u, part, f.size()); err == nil || !retry {
				break
			}
		}
		if err != nil {
			return err
		}
		if err := verifyFile(part, f); err != nil {
			os.Remove(part)
			if resumed && !fresh {
				// The bytes kept from an earlier run may be what is
				// wrong (a crash can leave garbage at the end): one
				// more try from the start.
				continue
			}
			return fmt.Errorf("download %s: %w; the download was discarded, run again to retry", name, err)
		}
		if err := os.Rename(part, dst); err != nil {
			return fmt.Errorf("download %s: %w", name, err)
		}
		if err := durable.SyncDir(filepath.Dir(dst)); err != nil {
			return fmt.Errorf("download %s: %w", name, err)
		}
		return nil
	}
}

// escapePath escapes each element of a repo path for a URL.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// downloadOnce makes one request for the rest of the file. retry says
// whether another try could help (a cut or stalled transfer, 429, 5xx).
func (c *hubClient) downloadOnce(name hubRef, u, part string, want int64) (retry bool, err error) {
	fp, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("download %s: %w", name, err)
	}
	defer func() {
		if cerr := fp.Close(); cerr != nil && err == nil {
			retry, err = false, fmt.Errorf("download %s: %w", name, cerr)
		}
	}()
	st, err := fp.Stat()
	if err != nil {
		return false, fmt.Errorf("download %s: %w", name, err)
	}
	have := st.Size()
	if have > want {
		if err := fp.Truncate(0); err != nil {
			return false, fmt.Errorf("download %s: %w", name, err)
		}
		have = 0
	}
	if have == want {
		return false, nil
	}

	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	req, err := c.request(ctx, u)
	if err != nil {
		return false, fmt.Errorf("download %s: %w", name, err)
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.do(name, req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := contentRangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			// Not the part asked for: start over rather than guess.
			fp.Truncate(0)
			return true, fmt.Errorf("download %s: the server sent bytes from %q, not from %d", name, resp.Header.Get("Content-Range"), have)
		}
	case http.StatusOK:
		have = 0 // the server ignored the range: the whole file follows
		if err := fp.Truncate(0); err != nil {
			return false, fmt.Errorf("download %s: %w", name, err)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		fp.Truncate(0)
		return true, fmt.Errorf("download %s: the server refused to resume at byte %d", name, have)
	default:
		return transient(resp.StatusCode), c.statusError(name, resp)
	}
	if _, err := fp.Seek(have, io.SeekStart); err != nil {
		return false, fmt.Errorf("download %s: %w", name, err)
	}

	// Nothing received for hubIdleTimeout cancels the request: a stalled
	// connection is then retried, resuming, instead of hanging.
	idle := time.AfterFunc(hubIdleTimeout, cancel)
	defer idle.Stop()
	w := &progressWriter{w: fp, file: name.path, done: have, total: want, report: c.onDownload, idle: idle}
	n, err := io.Copy(w, io.LimitReader(resp.Body, want-have+1))
	w.flush()
	got := have + n
	if err != nil {
		if c.ctx.Err() != nil {
			// The caller gave up (Ctrl-C): the part stays for the next run.
			return false, fmt.Errorf("download %s: %w after %d of %d bytes", name, c.ctx.Err(), got, want)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("nothing received for %s", hubIdleTimeout)
		}
		return true, fmt.Errorf("download %s: %w after %d of %d bytes", name, redact(err), got, want)
	}
	if got > want {
		fp.Truncate(0)
		return false, fmt.Errorf("download %s: more than the %d bytes the Hub lists; the download was discarded", name, want)
	}
	if got < want {
		return true, fmt.Errorf("download %s: connection closed after %d of %d bytes", name, got, want)
	}
	if err := fp.Sync(); err != nil {
		return false, fmt.Errorf("download %s: %w", name, err)
	}
	return false, nil
}

// contentRangeStart reads the first byte of "bytes START-END/SIZE".
func contentRangeStart(v string) (int64, bool) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil
}

// progressWriter counts bytes on their way to the file, tells the caller
// every MiB, and keeps the idle timer from firing while data flows.
type progressWriter struct {
	w            io.Writer
	file         string
	done, total  int64
	report       func(file string, done, total int64)
	idle         *time.Timer
	sinceReport  int64 // bytes since the last report
	reportedOnce bool
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.idle.Reset(hubIdleTimeout)
	n, err := p.w.Write(b)
	p.done += int64(n)
	p.sinceReport += int64(n)
	if p.report != nil && p.sinceReport >= 1<<20 {
		p.flush()
	}
	return n, err
}

func (p *progressWriter) flush() {
	if p.report != nil && (p.sinceReport > 0 || !p.reportedOnce) {
		p.report(p.file, p.done, p.total)
		p.sinceReport, p.reportedOnce = 0, true
	}
}

// verifyFile checks a download against the listing: its size, and its
// sha256 for LFS files or its git blob id for the others.
func verifyFile(p string, f hubFile) error {
	fp, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fp.Close()
	st, err := fp.Stat()
	if err != nil {
		return err
	}
	if st.Size() != f.size() {
		return fmt.Errorf("got %d bytes, the Hub lists %d", st.Size(), f.size())
	}
	var want, kind string
	var h interface {
		io.Writer
		Sum([]byte) []byte
	}
	switch {
	case f.LFS != nil && len(f.LFS.OID) == 64:
		want, kind, h = strings.ToLower(f.LFS.OID), "sha256", sha256.New()
	case f.LFS == nil && len(f.OID) == 40:
		// The git blob id: what the Hub lists for files not in LFS.
		want, kind, h = strings.ToLower(f.OID), "git blob id", sha1.New()
		fmt.Fprintf(h, "blob %d\x00", st.Size())
	default:
		return nil // the listing gives nothing to check against
	}
	if _, err := io.Copy(h, fp); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s %s, the Hub lists %s", kind, got, want)
	}
	return nil
}

// writeCacheFile writes a small cache file atomically and durably, creating
// its directory, so that readers see the old content or the new, never a
// part.
func writeCacheFile(p string, data []byte) error {
	if err := durable.MkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	return durable.WriteFile(p, data, 0o600)
}
