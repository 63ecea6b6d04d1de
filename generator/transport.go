package generator

// The HTTP side of the wire client: what travels with one request (the
// exchange), the Doer that sends our own body through go-openai and keeps
// the raw answer and its headers, and the idle bound of a streamed body.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// exchange is one request's state shared between Complete and the doer.
// The doer writes it before go-openai returns, and Complete reads it after:
// no two goroutines touch it at once.
type exchange struct {
	body   []byte // the request body to send instead of go-openai's
	chat   bool   // a chat completion: its body is ours to read
	keep   bool   // a 2xx body go-openai decodes, kept in raw too (the models list)
	stream bool
	status int
	header http.Header
	raw    []byte // a plain 2xx body, or an error body's first maxErrorBody bytes
	rawCut int64  // an error body longer than raw: its size, -1 when unknown; 0: raw is whole
	// stall, when > 0, bounds the silence of a 2xx stream's body: abort
	// cancels the attempt with errStalled (see idleBody).
	stall time.Duration
	abort context.CancelCauseFunc
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// doer is the HTTPDoer go-openai sends through.
type doer struct {
	next openai.HTTPDoer
	key  apiKey // redacted from the response's header values
}

var _ openai.HTTPDoer = (*doer)(nil)

// emptyObject is what go-openai decodes in place of a plain 2xx body: its
// ChatCompletionResponse would fail on shapes we accept, and we decode the
// real body ourselves.
var emptyObject = []byte("{}")

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return d.next.Do(req)
	}
	if ex.body != nil {
		body := ex.body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	resp, err := d.next.Do(req)
	if err != nil {
		return nil, err
	}
	d.key.redactHeader(resp.Header)
	ex.status, ex.header = resp.StatusCode, resp.Header
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if ok && ex.keep {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read response body (status %d): %w", resp.StatusCode, err)
		}
		ex.raw = raw
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		return resp, nil
	}
	if ok && (!ex.chat || ex.stream) {
		// go-openai decodes a models list itself, and reads an SSE body
		// line by line for RecvRaw to hand us each chunk.
		if ex.stream && ex.stall > 0 {
			resp.Body = watchIdle(resp.Body, ex.stall, func() { ex.abort(errStalled) })
		}
		return resp, nil
	}
	var raw []byte
	if ok {
		raw, err = io.ReadAll(resp.Body)
	} else {
		// An error body is read up to a bound; a 10 MB page is not read
		// (nor kept) whole on every attempt.
		raw, err = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
		if len(raw) > maxErrorBody {
			raw, ex.rawCut = raw[:maxErrorBody], resp.ContentLength
			if ex.rawCut <= 0 {
				ex.rawCut = -1
			}
		}
	}
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read response body (status %d): %w", resp.StatusCode, err)
	}
	ex.raw = raw
	if ok {
		resp.Body = io.NopCloser(bytes.NewReader(emptyObject))
	} else {
		resp.Body = io.NopCloser(bytes.NewReader(raw))
	}
	return resp, nil
}

// idleBody is a streamed body whose silence is watched: when no byte has
// arrived for limit, abort cancels the request, which ends the Read that
// waits. Bytes are what count, not chunks: a keep-alive comment from a
// server whose queue holds the request shows that the peer is alive.
type idleBody struct {
	io.ReadCloser
	limit time.Duration
	now   func() time.Duration // monotonic time since the watch began
	last  atomic.Int64         // now() at the last byte, in ns
	timer *time.Timer
	abort func()
}

func watchIdle(body io.ReadCloser, limit time.Duration, abort func()) *idleBody {
	began := time.Now()
	b := &idleBody{ReadCloser: body, limit: limit, abort: abort, now: func() time.Duration { return time.Since(began) }}
	// Armed after the field is set: check reads b.timer.
	b.timer = time.AfterFunc(time.Duration(math.MaxInt64), b.check)
	b.timer.Reset(limit)
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.last.Store(int64(b.now()))
	}
	return n, err
}

// check runs when the timer fires: the stream stalled if nothing came for
// limit, else the timer waits for what is left of limit since the last byte.
// One store per Read and one timer per stream: no timer reset per chunk.
func (b *idleBody) check() {
	idle := b.now() - time.Duration(b.last.Load())
	if idle >= b.limit {
		b.abort()
		return
	}
	b.timer.Reset(b.limit - idle)
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}
