package wire

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// statusError is an answer with an error status (below 200, or 400 and
// above: go-openai's rule): the error as go-openai types it, with what
// classifying it further needs (the headers for Retry-After, the body's
// first bytes for the server's message and the context sizes of a prompt
// that is too long).
type statusError struct {
	status int
	header http.Header
	body   []byte // the first maxErrorBody bytes
	cut    int64  // the body was longer than body: its size, -1 when unknown; 0: body is whole
	err    error  // go-openai's type of it (openai.go: apiError)
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// send sends one request to the server, path under its base URL, and
// returns the response when its status is not an error one. A transport
// failure is http.Client's error (`Post "URL": ...`); an error status is a
// *statusError, its body read (up to a bound) and closed.
func (c *Client) send(ctx context.Context, method, path string, body []byte, stream bool) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	// The header is filled by hand: the names are canonical already, and
	// the values every request shares are shared (net/http only reads a
	// request's header; http.Client clones it for a redirect), where
	// Header.Set would allocate a slice for each of them on every request.
	h := req.Header
	if body != nil {
		h["Content-Type"] = headerJSON
		// A server may close a keep-alive connection just as a request
		// goes out on it (llama-server drops about a third of them after
		// a streamed answer): the request then fails with an EOF before
		// any byte of its answer, through no fault of its own. net/http
		// sends such a request again on a new connection by itself, but
		// only one it knows is safe to replay, which a POST is when it
		// carries an Idempotency-Key. A chat completion is: nothing is
		// recorded of an answer that never began. Each request has its
		// own key, so a proxy that honours the header never mistakes two
		// attempts for one.
		h["Idempotency-Key"] = []string{c.replay.next()}
	}
	if stream {
		h["Accept"] = headerSSE
		h["Cache-Control"] = headerNoCache
	} else {
		h["Accept"] = headerJSON
	}
	if c.auth != nil {
		// No key, no header: vLLM without --api-key ignores one, and a
		// server that requires a key rejects "Bearer EMPTY" just the same.
		h["Authorization"] = c.auth
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	c.key.redactHeader(resp.Header)
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	// An error body is read up to a bound; a 10 MB page is not read (nor
	// kept) whole on every attempt.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the error body (status %d): %w", resp.StatusCode, err)
	}
	se := &statusError{status: resp.StatusCode, header: resp.Header, body: raw}
	if len(raw) > maxErrorBody {
		se.body, se.cut = raw[:maxErrorBody], resp.ContentLength
		if se.cut <= 0 {
			se.cut = -1
		}
	}
	se.err = apiError(resp, se.body)
	return nil, se
}

// Header values every request shares (send).
var (
	headerJSON    = []string{"application/json"}
	headerSSE     = []string{"text/event-stream"}
	headerNoCache = []string{"no-cache"}
)

// replayKeys makes the Idempotency-Key of each request a client sends: a
// prefix drawn once per client, then a count.
type replayKeys struct {
	prefix string
	n      *atomic.Uint64
}

func newReplayKeys() replayKeys {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return replayKeys{prefix: "synthgen-" + hex.EncodeToString(b[:]) + "-", n: new(atomic.Uint64)}
}

func (k replayKeys) next() string { return k.prefix + strconv.FormatUint(k.n.Add(1), 10) }
