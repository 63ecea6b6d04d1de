package wire

// The one seam with go-openai: its error types say what an error status,
// or an error event inside a stream, was, so that a failure means to
// synthgen what it means to go-openai's users. Nothing else of it is used
// (client.go says why).

import (
	"encoding/json"
	"errors"
	"net/http"

	openai "github.com/sashabaranov/go-openai"
)

// apiError is an error status as go-openai reports it: an *openai.APIError
// when the body is an OpenAI error object, else an *openai.RequestError
// with the body.
func apiError(resp *http.Response, body []byte) error {
	var er openai.ErrorResponse
	err := json.Unmarshal(body, &er)
	if err != nil || er.Error == nil {
		return &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode, Err: err, Body: body}
	}
	er.Error.HTTPStatus, er.Error.HTTPStatusCode = resp.Status, resp.StatusCode
	return er.Error
}

// streamError decodes a stream's non-event lines as go-openai decodes an
// error in a stream: an {"error":{...}} whose error is not null, as an
// *openai.APIError; nil when they are not one.
func streamError(lines []byte) error {
	var resp openai.ErrorResponse
	if json.Unmarshal(lines, &resp) != nil || resp.Error == nil {
		return nil
	}
	return resp.Error
}

// classifyStatus fills e from go-openai's error in err, when there is one:
// the status (an error event's in its code), the server's message, the
// cause and whether to retry; body is set to a *openai.RequestError's. It
// reports whether there was one.
func classifyStatus(err error, e *Error, body *[]byte) bool {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status := apiErr.HTTPStatusCode
		if status == 0 {
			// An error event inside a 200 stream: vLLM puts its status in
			// "code" (a number), OpenAI may put a string there.
			if c, ok := apiErr.Code.(int); ok && c >= 400 && c <= 599 {
				status = c
			}
		}
		e.Status = status
		if apiErr.Message != "" {
			e.Message = apiErr.Message
		}
		if status == 0 {
			e.Cause, e.Retryable = CauseStreamErr, true
		} else {
			e.Cause, e.Retryable = httpCause(status), retryableStatus(status)
		}
	case errors.As(err, &reqErr):
		e.Status, *body = reqErr.HTTPStatusCode, reqErr.Body
		e.Cause, e.Retryable = httpCause(e.Status), retryableStatus(e.Status)
		if m := errorMessage(reqErr.Body); m != "" {
			e.Message = m
		}
	default:
		return false
	}
	return true
}
