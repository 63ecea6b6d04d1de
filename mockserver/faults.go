package mockserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Fault kinds: what the mock injects on purpose, as Stats.Injected and the
// kind label of mock_faults_injected_total name them.
const (
	Fault429      = "http_429"  // 429 with a Retry-After header (Options.RetryAfter)
	Fault500      = "http_500"  // 500 with vLLM's error body
	Fault503      = "http_503"  // 503 with vLLM's error body
	FaultReset    = "reset"     // the connection reset before any byte of the response
	FaultResetMid = "reset_mid" // the connection reset halfway through the answer
	FaultBadChunk = "bad_chunk" // a malformed JSON chunk halfway through a stream (a plain answer: a malformed body)
	FaultCut      = "cut"       // the answer ends without a finish_reason (a stream: [DONE] early)
	FaultGarbage  = "garbage"   // a 200 whose body is an HTML page, not JSON
	FaultLength   = "length"    // the answer runs to max_tokens and ends with finish_reason "length"
	FaultRestart  = "restart"   // the whole server went away for Options.RestartFor (see Serve)
)

// faultKinds is the order in which one draw picks a request's fault: the
// rates are laid end to end on [0, 1).
var faultKinds = []string{Fault429, Fault500, Fault503, FaultReset, FaultResetMid, FaultBadChunk, FaultCut, FaultGarbage, FaultLength}

// FaultKinds lists every kind Stats.Injected may count, restart last.
func FaultKinds() []string { return append(append([]string(nil), faultKinds...), FaultRestart) }

// rates returns the per-request fault rates in faultKinds order.
func (o *Options) rates() []float64 {
	return []float64{o.Rate429, o.Rate500, o.Rate503, o.RateReset, o.RateResetMid, o.RateBadChunk, o.RateCut, o.RateGarbage, o.RateLength}
}

func (o *Options) validateFaults() error {
	sum := 0.0
	for i, r := range o.rates() {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("%s rate %v: must be between 0 and 1", faultKinds[i], r)
		}
		sum += r
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("fault rates add up to %v: at most 1", sum)
	}
	if o.RetryAfter < 0 {
		return fmt.Errorf("retry after %v: must not be negative", o.RetryAfter)
	}
	if o.RestartEvery < 0 {
		return fmt.Errorf("restart every %d: must not be negative", o.RestartEvery)
	}
	if o.RestartAt < 0 || o.RestartFor < 0 {
		return fmt.Errorf("restart at %v for %v: must not be negative", o.RestartAt, o.RestartFor)
	}
	return nil
}

// draw is a uniform number in [0, 1) from (Seed, id, salt) by SplitMix64,
// the same on every run.
func (s *Server) draw(id, salt uint64) float64 {
	z := uint64(s.opts.Seed) + id*0x9e3779b97f4a7c15 + salt*0xd1b54a32d192ed03
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// fault is the id-th request's injected fault, "" for none: one draw from
// (Seed, id), independent of the stall draw.
func (s *Server) fault(id uint64) string {
	if !s.faulty {
		return ""
	}
	u := s.draw(id, 1)
	for i, r := range s.opts.rates() {
		if u < r {
			return faultKinds[i]
		}
		u -= r
	}
	return ""
}

// inject counts one injected fault of kind.
func (s *Server) inject(kind string) {
	s.injected[kind].Add(1)
	s.faultsMetric.WithLabelValues(kind).Inc()
}

// failEarly answers the faults that come before any answer (status codes,
// a reset, a non-JSON body); it reports whether kind was one of them.
func (s *Server) failEarly(w http.ResponseWriter, kind string) bool {
	switch kind {
	case Fault429:
		secs := strconv.FormatFloat(s.opts.RetryAfter.Seconds(), 'f', -1, 64)
		w.Header().Set("Retry-After", secs)
		writeError(w, http.StatusTooManyRequests, "RateLimitError", "mock: too many requests (injected)", "")
	case Fault500:
		writeError(w, http.StatusInternalServerError, "InternalServerError", "mock: internal error (injected)", "")
	case Fault503:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "mock: service unavailable (injected)", "")
	case FaultReset:
		reset(w)
	case FaultGarbage:
		const page = "<html><head><title>502 Bad Gateway</title></head><body>injected by the mock</body></html>\n"
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(page))
	default:
		return false
	}
	s.inject(kind)
	s.faulted.Add(1)
	return true
}

// reset sends what was written so far, then closes the connection with a
// TCP reset (SO_LINGER 0) instead of an orderly close.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Serve serves s on ln until ctx ends, then shuts down, giving requests in
// flight grace to finish, and closes s (see Close). With Options.RestartEvery
// or RestartAt it also restarts on purpose: the listener and every
// connection are closed (requests in flight are cut), nothing listens for
// RestartFor, then it listens again on the same address. After Abandon it
// listens no more and, once ctx ends, closes what is held and cuts the
// requests still running, without grace: Abandon's hold was theirs.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	addr := ln.Addr().String()
	var restartAt <-chan time.Time
	if s.opts.RestartAt > 0 {
		t := time.NewTimer(s.opts.RestartAt)
		defer t.Stop()
		restartAt = t.C
	}
	for {
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
		if !s.conns.serve(srv, ln) { // abandoned while it was down
			_ = ln.Close()
			return s.serveAbandoned(ctx, srv)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		select {
		case err := <-served:
			if s.abandoned() { // Abandon closed the listener
				return s.serveAbandoned(ctx, srv)
			}
			s.conns.unserve(srv)
			return fmt.Errorf("mock: serve: %w", err)
		case <-ctx.Done():
			s.conns.unserve(srv)
			err := shutdown(ctx, srv, served, grace)
			s.Close()
			return err
		case <-restartAt:
		case <-s.restart:
		}
		s.conns.unserve(srv)
		s.inject(FaultRestart)
		_ = srv.Close() // cuts every connection, the requests in flight with it
		s.conns.closeKept()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) && !s.abandoned() {
			return fmt.Errorf("mock: serve: %w", err)
		}
		down := time.NewTimer(s.opts.RestartFor)
		select {
		case <-ctx.Done():
			down.Stop()
			s.Close()
			return nil
		case <-down.C:
		}
		if s.abandoned() { // while it was down: the port may be another's now
			return s.serveAbandoned(ctx, srv)
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("mock: listen again after a restart: %w", err)
		}
	}
}

// serveAbandoned waits for ctx to end, then closes what the abandoned s
// holds and cuts the requests still running on srv.
func (s *Server) serveAbandoned(ctx context.Context, srv *http.Server) error {
	s.conns.unserve(srv)
	<-ctx.Done()
	s.Close()
	_ = srv.Close()
	return nil
}

func shutdown(ctx context.Context, srv *http.Server, served <-chan error, grace time.Duration) error {
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Requests still running after the grace period are cut.
		_ = srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("mock: shutdown: %w", err)
		}
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("mock: serve: %w", err)
	}
	return nil
}
