package wire

import (
	"net/http"
	"strings"

	"github.com/synthgen/synthgen/internal/toolong"
)

// ContextSizes are the sizes a server gave when it refused a prompt that
// cannot fit the model's context (toolong.Sizes).
type ContextSizes = toolong.Sizes

const tooLongPrefix = "prompt too long for the model's context"

// markTooLong gives a 400 that refuses a prompt too long for the model's
// context its own cause, never retried, with the sizes ahead of the
// server's message: no retry can make the prompt fit. The sizes are read
// from the message (vLLM says them in words) or from the error body's
// fields (llama.cpp's exceed_context_size_error); body may be nil.
func markTooLong(e *Error, body []byte) {
	if e.Status != http.StatusBadRequest {
		return
	}
	markTooLongAny(e, body)
}

// MarkTooLong is markTooLong for an answer that did not come over HTTP
// itself: a batch's output or error line, whose status is its response's
// status_code, or 0 when the line holds only an error object. A 400 or no
// status at all whose message (or body) refuses the prompt as too long
// gets cause too_long, as the streaming path gives it.
func MarkTooLong(e *Error, body []byte) {
	if e.Status != 0 && e.Status != http.StatusBadRequest {
		return
	}
	markTooLongAny(e, body)
}

func markTooLongAny(e *Error, body []byte) {
	if strings.HasPrefix(e.Message, tooLongPrefix) {
		return
	}
	z, ok := toolong.Parse(e.Message)
	if !ok {
		z, ok = toolong.ParseBody(body)
	}
	if !ok {
		return
	}
	e.Cause, e.Retryable = CauseTooLong, false
	e.Sizes = z
	if s := z.String(); s != "" {
		e.Message = tooLongPrefix + " (" + s + "): " + e.Message
	}
}
