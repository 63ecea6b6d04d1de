package wire

// The HTTP side of the wire client: what travels with one request (the
// exchange), the Doer that sends our own body through go-openai and keeps
// the raw answer and its headers, and the idle bound of a streamed body.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
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
	// rawBuf holds a plain 2xx body's buffer (raw), from answerBufs:
	// completePlain gives it back once the answer is decoded.
	rawBuf *answerBuf
	rawCut int64 // an error body longer than raw: its size, -1 when unknown; 0: raw is whole
	// stall, when > 0, bounds the silence of a 2xx stream's body: abort
	// cancels the attempt with errStalled (see idleBody).
	stall time.Duration
	abort context.CancelCauseFunc
	// events is a 2xx stream's body (watched for stalls), which sseReader
	// reads; go-openai's own reader of it is never called.
	events io.Reader
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// doer is the HTTPDoer go-openai sends through.
type doer struct {
	next openai.HTTPDoer
	// rt, when set, is next's transport, which a chat completion goes
	// through directly (see send).
	rt  http.RoundTripper
	key apiKey // redacted from the response's header values
}

// send sends a chat completion. An http.Client adds nothing to one that
// goes straight to our own transport (no jar, no timeout of its own, no
// credentials in the URL) but a copy of the headers and the URL kept for
// redirects, per request (ARCHITECTURE.md, "The wire client"); so it goes
// to the transport, and its error is wrapped as the Client wraps it
// (`Post "URL": ...`). A redirect, which the Client would follow, is
// handed to the Client: the request is sent again through it.
func (d *doer) send(req *http.Request) (*http.Response, error) {
	if d.rt == nil || req.URL.User != nil {
		return d.next.Do(req)
	}
	resp, err := d.rt.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if resp.Header.Get("Location") == "" || req.GetBody == nil {
			return resp, nil // the Client returns it as is too
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		body, err := req.GetBody()
		if err != nil {
			return nil, &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}
		}
		req.Body = body
		return d.next.Do(req)
	}
	return resp, nil
}

// urlErrorOp is the Op of the *url.Error an http.Client returns: "Post".
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

var _ openai.HTTPDoer = (*doer)(nil)

// errAnswerKept is what the doer returns to go-openai once it has kept a
// plain 2xx chat answer in exchange.raw: go-openai hands it back as is,
// completePlain takes it for success and decodes the raw answer itself.
// go-openai's own decode of the body (its ChatCompletionResponse would fail
// on shapes we accept) is skipped whole: a json.Decoder with its buffer per
// request, for nothing (ARCHITECTURE.md, "The wire client").
var errAnswerKept = errors.New("the answer was kept by the doer")

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
	send := d.next.Do
	if ex.chat {
		send = d.send
	}
	resp, err := send(req)
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
		// go-openai decodes a models list itself. A stream's body stays
		// go-openai's to close (stream.Close), and ours to read.
		if ex.stream && ex.stall > 0 {
			resp.Body = watchIdle(resp.Body, ex.stall, func() { ex.abort(errStalled) })
		}
		if ex.stream {
			ex.events = resp.Body
		}
		return resp, nil
	}
	var raw []byte
	if ok {
		ex.rawBuf = answerBufs.Get().(*answerBuf)
		raw, err = readAllInto(ex.rawBuf.b, resp.Body, resp.ContentLength)
		ex.rawBuf.b = raw
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
		return nil, errAnswerKept
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	if ex.stream {
		// go-openai takes a status below 400 (a 304) for a stream
		// too: sseReader reads what it would have read.
		ex.events = resp.Body
	}
	return resp, nil
}

// readAllSized is io.ReadAll into one buffer of the size the server
// announced (vLLM sends Content-Length with a plain answer), instead of a
// buffer that grows from 512 bytes through copies. A size that is unknown
// or implausible for one answer reads as io.ReadAll does.
func readAllSized(r io.Reader, size int64) ([]byte, error) { return readAllInto(nil, r, size) }

// readAllInto is readAllSized into b when b has room for size+1 bytes.
func readAllInto(b []byte, r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > maxSizedBody {
		return io.ReadAll(r)
	}
	if int64(cap(b)) > size {
		b = b[:0]
	} else {
		b = make([]byte, 0, size+1) // +1: the read that sees EOF needs room
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: grow as ReadAll does
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// answerBuf is a plain answer's body buffer, reused across requests: the
// answer is decoded into strings of its own, so once decoded, the bytes
// are garbage, about 0.7 KB a request at the zero-latency mock
// (ARCHITECTURE.md, "The wire client").
type answerBuf struct{ b []byte }

var answerBufs = sync.Pool{New: func() any { return new(answerBuf) }}

// maxPooledAnswer bounds the buffers kept for reuse: a rare long answer's
// buffer is left to the collector rather than held by the pool.
const maxPooledAnswer = 64 << 10

// release gives the buffer back; neither it nor the bytes it held are
// used after.
func (a *answerBuf) release() {
	if cap(a.b) > maxPooledAnswer {
		a.b = nil
	}
	a.b = a.b[:0]
	answerBufs.Put(a)
}

// maxSizedBody bounds the buffer readAllSized makes up front from a
// Content-Length: a larger answer grows as it arrives.
const maxSizedBody = 64 << 20

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

// sseReader reads the events of a 2xx stream's body: each call to next
// returns the payload of one `data:` line, as go-openai's RecvRaw would,
// but without its two regular expressions and its copy per line (measured
// in ARCHITECTURE.md, "The wire client"). go-openai still builds the
// request, sends it through the doer and turns an error status into its
// *APIError; this reads the body the doer kept (exchange.events). The
// rules are go-openai's:
//   - a line is trimmed of white space; `data:` and the white space after
//     it are the prefix; a payload `[DONE]` ends the stream (io.EOF);
//   - a line that is not data (a keep-alive comment, an error body sent in
//     place of events) is not an event; the non-comment ones are kept (up to
//     maxErrorBody), and when the body ends, what they hold is decoded as an
//     OpenAI error: an error object there is the stream's error;
//   - a `data: {"error":...}` line is an error event: its payload, with
//     any non-data lines after it up to the next line read, is the error;
//   - a last line with no newline is not an event (it may be cut).
//
// A payload is a slice of the reader's buffer, valid until the next call:
// decodeChunk copies what it keeps.
type sseReader struct {
	r      *bufio.Reader
	line   []byte // a line longer than the buffer, assembled
	errBuf []byte // the non-data lines, up to maxErrorBody
	done   bool
}

// sseBufSize is the read buffer of one stream: a vLLM chunk is a few
// hundred bytes, so one Read brings many.
const sseBufSize = 16 << 10

// maxSSELine bounds one line: a line that long is no chunk (answerBound
// ends a stream long before its text could fill one), and a server that
// never sends a newline must not fill memory.
const maxSSELine = 16 << 20

var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sseBufSize) }}

var errSSELine = fmt.Errorf("stream: a line longer than %d bytes", maxSSELine)

func newSSEReader(body io.Reader) *sseReader {
	r := sseReaders.Get().(*bufio.Reader)
	r.Reset(body)
	return &sseReader{r: r}
}

// release returns the buffer to the pool; the reader is not used after.
func (s *sseReader) release() {
	if s.r != nil {
		s.r.Reset(nil)
		sseReaders.Put(s.r)
		s.r = nil
	}
}

var (
	sseData     = []byte("data:")
	sseDone     = []byte("[DONE]")
	sseErrorObj = []byte(`{"error":`)
)

// next returns the next event's payload, io.EOF after [DONE] or at the end
// of a body that held no error, or the error the body carried.
func (s *sseReader) next() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	inError := false
	for {
		raw, err := s.readLine()
		if err != nil || inError {
			if apiErr := s.bodyError(); apiErr != nil {
				return nil, fmt.Errorf("error event: %w", apiErr)
			}
			if err == nil {
				// An error event that does not decode as one: go-openai
				// hands back nothing, which decodeChunk would refuse; say so.
				return nil, fmt.Errorf("stream: an error event that is not an OpenAI error: %s", boundMessage(string(s.errBuf), 0))
			}
			return nil, err
		}
		line := bytes.TrimSpace(raw)
		payload, isData := bytes.CutPrefix(line, sseData)
		if isData {
			payload = trimRE2Space(payload)
			if bytes.HasPrefix(payload, sseErrorObj) {
				inError, isData = true, false
				line = payload
			}
		}
		if !isData {
			if len(line) > 0 && line[0] != ':' { // a comment cannot be part of an error body
				s.keep(line)
			}
			continue
		}
		if bytes.Equal(payload, sseDone) {
			s.done = true
			return nil, io.EOF
		}
		return payload, nil
	}
}

// trimRE2Space drops the white space go-openai's `^data:\s*` takes with the
// prefix (RE2's \s: tab, newline, form feed, carriage return, space).
func trimRE2Space(b []byte) []byte {
	for len(b) > 0 {
		switch b[0] {
		case ' ', '\t', '\n', '\f', '\r':
			b = b[1:]
		default:
			return b
		}
	}
	return b
}

// readLine returns the next line with its newline; a last line without one
// comes with the read error (io.EOF), as from bufio.Reader.ReadBytes.
func (s *sseReader) readLine() ([]byte, error) {
	b, err := s.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return b, err
	}
	s.line = append(s.line[:0], b...)
	for err == bufio.ErrBufferFull {
		if len(s.line) > maxSSELine {
			return nil, errSSELine
		}
		b, err = s.r.ReadSlice('\n')
		s.line = append(s.line, b...)
	}
	return s.line, err
}

func (s *sseReader) keep(line []byte) {
	if room := maxErrorBody - len(s.errBuf); room > 0 {
		s.errBuf = append(s.errBuf, line[:min(len(line), room)]...)
	}
}

// bodyError decodes the kept lines as go-openai decodes an error in a
// stream: an {"error":{...}} whose error is not null.
func (s *sseReader) bodyError() *openai.APIError {
	if len(s.errBuf) == 0 {
		return nil
	}
	var resp openai.ErrorResponse
	if json.Unmarshal(s.errBuf, &resp) != nil {
		return nil
	}
	return resp.Error
}
