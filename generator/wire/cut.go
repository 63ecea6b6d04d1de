package wire

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// What ends one request before its answer does: its own context (the
// timeout, and the cuts with a cause: a stall, the stranded-stream rules)
// and how such a cut is said.

// failStall is fail for a request whose stream is watched for silence: a
// cut made by the watch is a stall, not the caller's cancel.
func (c *Client) failStall(ctx context.Context, stall time.Duration, err error) *Error {
	if errors.Is(context.Cause(ctx), errStranded) {
		return &Error{Cause: CauseStall, Retryable: true,
			Message: fmt.Sprintf("no answer, not even headers, %s (endpoint.stall_timeout) after a request sent later to this server had its own: the server lost it (an old process still holding its queue?)", stall),
			Err:     fmt.Errorf("%w: %v", errStranded, err)}
	}
	if errors.Is(context.Cause(ctx), errIdle) {
		return &Error{Cause: CauseStall, Retryable: true,
			Message: "no answer, not even headers, after a request sent later to this server had its own, and its /metrics shows nothing running or waiting: the server lost it (an old process still holding its connections?)",
			Err:     fmt.Errorf("%w: %v", errIdle, err)}
	}
	if errors.Is(context.Cause(ctx), errSilent) {
		return &Error{Cause: CauseStall, Retryable: true,
			Message: fmt.Sprintf("no answer, not even headers, for %s (endpoint.stall_timeout) while other replicas answered or stood idle: this server takes requests and says nothing", stall),
			Err:     fmt.Errorf("%w: %v", errSilent, err)}
	}
	if errors.Is(context.Cause(ctx), errStalled) {
		return &Error{Cause: CauseStall, Retryable: true,
			Message: fmt.Sprintf("no byte for %s (endpoint.stall_timeout)", stall),
			Err:     fmt.Errorf("%w: %v", errStalled, err)}
	}
	return c.fail(ctx, err)
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

// errTimedOut is the cause with which a request's own context ends at
// endpoint.timeout: a deadline, classified as one (CauseTimeout).
var errTimedOut = fmt.Errorf("endpoint.timeout: %w", context.DeadlineExceeded)

// requestContext is ctx for one chat completion, which abort ends with a
// cause, and the timer that ends it at the timeout (nil: no timeout);
// the caller stops both. Neither a timeout nor cuttable: ctx itself, and
// no context is made.
func (c *Client) requestContext(ctx context.Context, cuttable bool) (context.Context, context.CancelCauseFunc, *time.Timer) {
	if c.timeout <= 0 && !cuttable {
		return ctx, nil, nil
	}
	ctx, abort := context.WithCancelCause(ctx)
	if c.timeout <= 0 {
		return ctx, abort, nil
	}
	return ctx, abort, time.AfterFunc(c.timeout, func() { abort(errTimedOut) })
}
