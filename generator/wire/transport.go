package wire

// The bytes of an answer: reading a plain body into a reused buffer, the
// idle bound of a streamed body, and the reader of its events.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

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
	began time.Time
	now   func() time.Duration // monotonic time since the watch began
	last  atomic.Int64         // now() at the last byte, in ns
	timer *time.Timer
	// rearm sets the timer to fire in d (timer.Reset; a test watches it).
	rearm func(d time.Duration)
	abort func()
}

func watchIdle(body io.ReadCloser, limit time.Duration, abort func()) *idleBody {
	began := time.Now()
	b := &idleBody{ReadCloser: body, limit: limit, abort: abort, began: began, now: func() time.Duration { return time.Since(began) }}
	// Armed after the field is set: check reads b.timer.
	b.timer = time.AfterFunc(time.Duration(math.MaxInt64), b.check)
	b.rearm = func(d time.Duration) { b.timer.Reset(d) }
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

// lastByte is when the last byte came; the watch's start before any.
func (b *idleBody) lastByte() time.Time { return b.began.Add(time.Duration(b.last.Load())) }

// check runs when the timer fires: the stream stalled if nothing came for
// limit, else the timer waits for what is left of limit since the last byte.
// One store per Read and one timer per stream: no timer reset per chunk.
func (b *idleBody) check() {
	idle := b.now() - time.Duration(b.last.Load())
	if idle >= b.limit {
		b.abort()
		return
	}
	b.rearm(b.limit - idle)
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// sseReader reads the events of a 2xx stream's body: each call to next
// returns the payload of one `data:` line, as go-openai's RecvRaw would,
// but without its two regular expressions and its copy per line (see
// docs/decisions/, "wire client"). The rules are go-openai's, so that a
// server's stream means to synthgen what it means to go-openai's users:
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

// maxKeptLine is the longest assembled line's buffer a stream keeps for
// its next long line.
const maxKeptLine = 4 * sseBufSize

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

// ready reports whether the next line is already read: a line end in the
// buffer after the blank lines that close an event. While it is, the next
// call to next does not wait for the server.
func (s *sseReader) ready() bool {
	n := s.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := s.r.Peek(n)
	i := 0
	for i < len(b) && (b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return bytes.IndexByte(b[i:], '\n') >= 0
}

// deltaBatch counts a stream's text chunks and reports them (Complete's
// onDelta) when the stream is about to wait, and at its end: one report a
// read, not one a chunk, which the caller's counters (atomics and a clock
// read) would otherwise pay for every token.
type deltaBatch struct {
	report  func(int)
	events  *sseReader
	pending int
}

func (d *deltaBatch) add() {
	if d.report == nil {
		return
	}
	if d.pending++; !d.events.ready() {
		d.flush()
	}
}

func (d *deltaBatch) flush() {
	if d.pending > 0 {
		d.report(d.pending)
		d.pending = 0
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
	if cap(s.line) > maxKeptLine {
		// A long line (the first chunk's prompt_token_ids of a long
		// prompt) is decoded by now: it is not held for the rest of
		// the stream.
		s.line = nil
	}
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
// stream (openai.go: streamError); nil when they are none.
func (s *sseReader) bodyError() error {
	if len(s.errBuf) == 0 {
		return nil
	}
	return streamError(s.errBuf)
}
