package hub

// HTTP to the Hub: the client, its requests and retries, and the errors a
// refusal becomes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/backoff"
)

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
