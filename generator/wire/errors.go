package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Causes: the short classes of a failure, as written to DIR/errors/ and
// counted by Stats. An HTTP status is "http_NNN" (see httpCause).
const (
	CauseTimeout    = "timeout"        // the request's deadline passed
	CauseConnection = "connection"     // refused, reset, EOF before any answer
	CauseStreamCut  = "stream_cut"     // the stream ended before a finish_reason
	CauseStall      = "stall"          // a stream sent no byte for the stall timeout
	CauseOverlong   = "overlong"       // a stream brought more text than max_tokens allows, without a finish_reason
	CauseIncomplete = "incomplete"     // a plain answer without choices or finish_reason
	CauseAborted    = "aborted"        // the server finished with "abort"/"error"
	CauseDecode     = "decode"         // a 2xx body that is not a chat completion
	CauseStreamErr  = "stream_error"   // an error event inside a 200 stream, no code
	CauseCanceled   = "canceled"       // the caller's context was canceled
	CauseRequest    = "request"        // the request could not be built
	CauseOther      = "error"          // anything else
	CauseTLS        = "tls"            // the server's certificate is not trusted
	CauseLength     = "length"         // an answer cut at max_tokens, asked again with more room (on_length: retry)
	CauseModel      = "model_mismatch" // an answer from another model than the job's (a replica serving the wrong one)
	CauseBatch      = "batch"          // a batch's line failed, or its batch ended without it (generator/batch); never retried in the run
	// CauseTooLong is a prompt the server can never take: the prompt plus
	// max_tokens exceed the model's context (vLLM's max_model_len). It is
	// never retried; the summary counts it apart.
	CauseTooLong = "too_long"
)

// httpCause is the cause of an HTTP error status: "http_429", "http_500".
func httpCause(status int) string { return "http_" + strconv.Itoa(status) }

// Error is a classified failure of one request: what the engine needs to
// decide on a retry and what the error record keeps.
type Error struct {
	Status     int           // HTTP status; 0 when there was none
	Message    string        // the server's own message when it sent one, else the error text
	Cause      string        // short class, see the Cause constants
	RetryAfter time.Duration // from a 429/503 retry-after-ms or Retry-After header; 0 when absent
	Limits     Limits        // the rate limits an error answer stated (ratelimit.go)
	Retryable  bool          // whether the same request may succeed later
	Sizes      ContextSizes  // cause too_long: what the server said of the context
	Err        error         // the underlying error
}

var _ error = (*Error)(nil)

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Cause)
	if e.Status != 0 && e.Cause != httpCause(e.Status) {
		fmt.Fprintf(&b, " (status %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error, so errors.Is(err, context.Canceled)
// and errors.As(err, **openai.APIError) see through an *Error (openai.go).
func (e *Error) Unwrap() error { return e.Err }

// errStreamCut is the underlying error of a stream that ended (io.EOF, with or
// without [DONE]) before any finish_reason: the end of the body looks like a
// normal end, so it is ours to call it a failure.
var errStreamCut = errors.New("stream ended before a finish_reason")

// errStalled is the cause with which a stream's watch cancels an attempt
// that received nothing for the stall timeout (see idleBody).
var errStalled = errors.New("stream stalled")

// Classify turns any error from this package, go-openai, net/http or a
// context into an *Error. It never returns nil for a non-nil err; for nil it
// returns nil.
func Classify(err error) *Error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	e := &Error{Err: err, Message: err.Error()}
	var body []byte // an error status's body, for markTooLong
	switch {
	case errors.Is(err, context.Canceled):
		e.Cause = CauseCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		e.Cause, e.Retryable = CauseTimeout, true
	case classifyStatus(err, e, &body):
	case IsCertificateError(err):
		// No retry makes a certificate trusted: say so at once.
		e.Cause = CauseTLS
	case errors.Is(err, errStreamCut):
		e.Cause, e.Retryable = CauseStreamCut, true
	case isTimeout(err):
		e.Cause, e.Retryable = CauseTimeout, true
	case isConnection(err):
		e.Cause, e.Retryable = CauseConnection, true
	default:
		e.Cause = CauseOther
	}
	markTooLong(e, body)
	return e
}

// retryableStatus: rate limits and server-side failures may pass; any other
// 4xx is the request's own fault and will fail the same way again. 408 (the
// server's request timeout) and 409 are transient by their definition.
func retryableStatus(status int) bool {
	switch {
	case status == http.StatusTooManyRequests, status == http.StatusRequestTimeout,
		status == http.StatusConflict:
		return true
	case status >= 500:
		return true
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isConnection(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return true
	}
	// net/http keeps these unexported: a reused keep-alive connection the
	// server closed (on restart, or its idle timeout) under a POST, which the
	// transport does not retry by itself.
	msg := err.Error()
	return strings.Contains(msg, "server closed idle connection") ||
		strings.Contains(msg, "transport connection broken")
}

// errorMessage extracts the server's message from an error body: OpenAI's
// {"error":{"message":...}}, vLLM's {"object":"error","message":...}, a bare
// {"error":"..."}, FastAPI's {"detail":...}; a message that is not a string
// (vLLM nests validation details) is kept as its JSON text. A body that is not
// JSON is kept as text, trimmed. Either is bounded (boundMessage).
func errorMessage(body []byte) string { return errorMessageCut(body, 0) }

// errorMessageCut is errorMessage of the first bytes of a body that was
// not read whole (bodyCut: its size, or -1 when unknown; 0: whole).
func errorMessageCut(body []byte, bodyCut int64) string {
	if bodyCut != 0 {
		// Half a JSON document does not parse: its text is the message.
		return boundMessage(strings.TrimSpace(string(body)), bodyCut)
	}
	var top struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return boundedText(body)
	}
	if len(top.Error) > 0 && string(top.Error) != "null" {
		var inner struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(top.Error, &inner) == nil && len(inner.Message) > 0 {
			return rawText(inner.Message)
		}
		return rawText(top.Error)
	}
	if len(top.Message) > 0 && string(top.Message) != "null" {
		return rawText(top.Message)
	}
	if len(top.Detail) > 0 && string(top.Detail) != "null" {
		return rawText(top.Detail)
	}
	return boundedText(body)
}

// rawText is a JSON string's value, or any other JSON value's text.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return boundMessage(s, 0)
	}
	return boundedText(raw)
}

// maxMessage bounds a message kept from a server: a 10 MB HTML page from a
// proxy, or a message that repeats the prompt, must not fill DIR/errors/
// once per failed key.
const maxMessage = 4096

// maxErrorBody bounds what is read of an error body: the rest is
// never read (the connection is closed rather than drained).
const maxErrorBody = 64 << 10

// maxModelsBody bounds what is read of a models list (a gateway may
// list thousands of models; a list cut there fails to decode, as it should).
const maxModelsBody = 16 << 20

func boundedText(b []byte) string { return boundMessage(strings.TrimSpace(string(b)), 0) }

// boundMessage keeps the first maxMessage bytes of s (whole runes) and says
// that it was cut and from how much: total bytes (0: len(s); -1: unknown,
// more than maxErrorBody).
func boundMessage(s string, total int64) string {
	if total == 0 {
		if len(s) <= maxMessage {
			return s
		}
		total = int64(len(s))
	}
	if len(s) > maxMessage {
		n := maxMessage
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if total < 0 {
		return fmt.Sprintf("%s... (cut: more than %d bytes)", s, maxErrorBody)
	}
	return fmt.Sprintf("%s... (cut: %d bytes)", s, total)
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 10.2.3). Anything unparsable, negative or past is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if !(secs > 0) || secs > 1e9 { // also rejects NaN
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
