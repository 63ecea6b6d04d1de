package hub

// Resumable, verified downloads of a commit's files into the cache.

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/durable"
)

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
	if have, retry, err = c.resumeAt(name, resp, fp, have); err != nil {
		return retry, err
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

// resumeAt reads the answer to a request for the file from byte have:
// the part asked for, or the whole file (the server ignored the range),
// and seeks fp to where its body goes; retry and err as downloadOnce's.
func (c *hubClient) resumeAt(name hubRef, resp *http.Response, fp *os.File, have int64) (at int64, retry bool, err error) {
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := contentRangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			// Not the part asked for: start over rather than guess.
			fp.Truncate(0)
			return 0, true, fmt.Errorf("download %s: the server sent bytes from %q, not from %d", name, resp.Header.Get("Content-Range"), have)
		}
	case http.StatusOK:
		have = 0 // the server ignored the range: the whole file follows
		if err := fp.Truncate(0); err != nil {
			return 0, false, fmt.Errorf("download %s: %w", name, err)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		fp.Truncate(0)
		return 0, true, fmt.Errorf("download %s: the server refused to resume at byte %d", name, have)
	default:
		return 0, transient(resp.StatusCode), c.statusError(name, resp)
	}
	if _, err := fp.Seek(have, io.SeekStart); err != nil {
		return 0, false, fmt.Errorf("download %s: %w", name, err)
	}
	return have, false, nil
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
