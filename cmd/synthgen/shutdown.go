package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// shutdown is run's two-stage handling of SIGINT and SIGTERM. Before the
// run is armed (counting the dataset, waiting for a server that is still
// loading) a signal stops at once: nothing is in flight. Once armed, the
// first signal drains (no new request; the ones in flight finish) and the
// second, or the end of the grace period, cancels ctx and with it the
// requests in flight. SIGHUP is ignored, so a job survives its terminal
// under nohup.
type shutdown struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sigs   chan os.Signal
	got    chan struct{} // closed on the first signal

	mu    sync.Mutex
	drain func() // what the first signal does (arm); nil: stop at once
}

func newShutdown(parent context.Context, grace time.Duration, stderr io.Writer) *shutdown {
	ctx, cancel := context.WithCancelCause(parent)
	s := &shutdown{ctx: ctx, cancel: cancel, sigs: make(chan os.Signal, 2), got: make(chan struct{})}
	signal.Ignore(syscall.SIGHUP)
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	go s.watch(grace, stderr)
	return s
}

func (s *shutdown) watch(grace time.Duration, stderr io.Writer) {
	select {
	case <-s.sigs:
	case <-s.ctx.Done():
		return
	}
	close(s.got)
	s.mu.Lock()
	drain := s.drain
	s.mu.Unlock()
	if drain == nil {
		s.cancel(errors.New("interrupted before the run started"))
		return
	}
	drain()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.sigs:
		// The terminal echoed "^C" where the cursor was: start a new line.
		fmt.Fprintln(stderr, "\nstopping now: requests in flight are cancelled and will be asked again on resume")
		s.cancel(errors.New("second signal"))
	case <-t.C:
		fmt.Fprintf(stderr, "stopping now: shutdown.grace (%s) is over\n", grace)
		s.cancel(errors.New("grace period over"))
	case <-s.ctx.Done():
	}
}

// arm hands over what the first signal does once the run has started;
// the hidden-state pass that follows the run arms its own in its place.
func (s *shutdown) arm(drain func()) {
	s.mu.Lock()
	s.drain = drain
	s.mu.Unlock()
}

// interrupted reports whether a signal came.
func (s *shutdown) interrupted() bool {
	select {
	case <-s.got:
		return true
	default:
		return false
	}
}

// early is err, unless a signal stopped the run before it started.
func (s *shutdown) early(err error) error {
	if s.interrupted() {
		return &exitError{code: exitInterrupted, asked: true,
			err: errors.New("interrupted before the run started: nothing was asked yet; run the same command to start")}
	}
	return err
}

// stop ends the watch and restores the default signal handling.
func (s *shutdown) stop() {
	signal.Stop(s.sigs)
	s.cancel(nil)
}
