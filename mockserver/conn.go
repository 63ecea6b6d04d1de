package mockserver

// Connection-level behaviours of servers other than vLLM, for testing how a
// client copes with them:
//
//   - Options.HeadersWhenRunning (chat.go): a queued stream gets no byte,
//     not even its status line, until it runs, as with llama.cpp.
//   - Options.RateCloseAfter: after some complete answers the server
//     closes the kept-alive connection without having said
//     "Connection: close", as llama.cpp does after some streamed answers.
//     A real server's close races the client's next request: the client
//     either sees the close while the connection is idle (and dials anew)
//     or sends its request first and reads EOF. The mock makes the second
//     case certain: the connection stays open and silent until the client
//     sends its next request on it, and is then closed (an orderly FIN)
//     before a byte of the response. net/http's client replays such a
//     request on a new connection only when it is idempotent (a GET, or a
//     POST with an Idempotency-Key header and a GetBody); otherwise its
//     Do returns an error wrapping io.EOF.
//   - Server.Abandon: the server stops listening at once and holds every
//     request that is not running yet open without a byte, while the
//     running ones go on, as an old llama.cpp process does after SIGTERM
//     while a new one starts on the same port.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// keptIdle bounds how long a connection kept for RateCloseAfter waits for
// the client's next request; then it is closed as an idle one would be.
const keptIdle = 30 * time.Second

// drainFor bounds how long a closed connection's unread request is
// drained, so that the close is an orderly end and not a reset.
const drainFor = 5 * time.Second

// conns is what a Server holds open on its own: the requests an abandoned
// server holds and the connections kept for RateCloseAfter.
type conns struct {
	abandon     chan struct{} // closed by Abandon
	closed      chan struct{} // closed by Close
	abandonOnce sync.Once
	closeOnce   sync.Once

	mu      sync.Mutex
	serving map[*http.Server]net.Listener // Serve's current server: Abandon closes its listener
	kept    map[net.Conn]struct{}         // connections waiting to be closed (RateCloseAfter)
	// wg counts the held requests and the kept connections' goroutines.
	// Add is called under mu and only while closed is open, so Close's
	// Wait never races an Add from zero.
	wg sync.WaitGroup

	held, closedAfter, droppedReuses atomic.Int64
}

func (c *conns) init() {
	c.abandon = make(chan struct{})
	c.closed = make(chan struct{})
	c.serving = map[*http.Server]net.Listener{}
	c.kept = map[net.Conn]struct{}{}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// abandoned reports whether Abandon (or Close) was called.
func (s *Server) abandoned() bool { return isDone(s.conns.abandon) }

// Abandon makes s act as a server process that is being replaced: Serve
// closes its listener before Abandon returns (so a new server may listen
// on the same address at once) and stops keeping connections alive (idle
// ones are closed, running answers end with "Connection: close"). Every
// request that is not running yet, queued or arriving later on an open
// connection, never runs: its connection stays open without a byte more
// (with HeadersWhenRunning, without any byte) until its client goes away,
// Close is called, or Serve's context ends; then it is closed without an
// answer and the request counts as aborted. Stats.Held counts the requests
// held. Requests running already (admitted before Abandon) go on and
// finish. Calling Abandon again does nothing.
//
// Under Serve, Serve returns once its context ends, after closing what is
// held. A Server mounted on another server (httptest) must be closed with
// Close before that server's Close, which would otherwise wait for the
// held requests; its listener is the caller's to close.
func (s *Server) Abandon() {
	c := &s.conns
	c.abandonOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		close(c.abandon)
		for srv, ln := range c.serving {
			_ = ln.Close()
			srv.SetKeepAlivesEnabled(false)
		}
		c.closeKeptLocked()
	})
}

// Close ends what s holds open on its own: it abandons s (see Abandon),
// closes the connections of the requests held without an answer and the
// ones kept for RateCloseAfter, and waits until they are closed. Requests
// running go on. Serve closes s when it returns; a test that mounts s on an
// httptest server and uses Abandon or RateCloseAfter closes it before the
// httptest server (t.Cleanup runs the last registered first).
func (s *Server) Close() {
	s.Abandon()
	c := &s.conns
	c.closeOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		close(c.closed)
		c.closeKeptLocked()
	})
	c.wg.Wait()
}

// abort counts a request that ends without its answer (it was never
// admitted, or was preempted and not readmitted). When the server is
// abandoned and the client is still there, the request is held first: its
// connection stays open without a byte until the client goes away or Close
// is called, and is then closed without an answer.
func (s *Server) abort(w http.ResponseWriter, done <-chan struct{}) {
	drop := s.abandoned() && !isDone(done)
	if drop && s.conns.startHold() {
		defer s.conns.wg.Done() // after dropConn, even when it panics
		s.conns.held.Add(1)
		select {
		case <-done:
		case <-s.conns.closed:
		}
		s.conns.held.Add(-1)
	}
	s.aborted.Add(1)
	s.success.WithLabelValues("abort").Inc()
	if drop {
		dropConn(w)
	}
}

// startHold counts a held request in wg; false once Close has begun.
func (c *conns) startHold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if isDone(c.closed) {
		return false
	}
	c.wg.Add(1)
	return true
}

// dropConn closes the request's connection without a byte more.
func dropConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// closesAfter says whether the id-th request's connection is closed after
// its answer (RateCloseAfter): a draw from (Seed, id), independent of the
// stall and fault draws.
func (s *Server) closesAfter(id uint64) bool {
	return s.opts.RateCloseAfter != 0 && s.draw(id, 2) < s.opts.RateCloseAfter
}

// closeAfter ends a complete answer whose connection is to be closed: the
// answer reaches the client in full, and the connection, which the answer
// did not mark "Connection: close", is kept without a byte until the
// client sends its next request on it (then closed before any byte of the
// response), closes it, or keptIdle passes. A connection that closes after
// this answer anyway (the client asked, HTTP/1.0) or is not HTTP/1 is left
// to net/http.
func (s *Server) closeAfter(w http.ResponseWriter, r *http.Request, stream bool) {
	if r.Close || r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	c := &s.conns
	// Counted before the answer's last bytes go out, as finish counts the
	// answer: a client that has read it sees it counted.
	c.closedAfter.Add(1)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		c.closedAfter.Add(-1)
		return
	}
	if stream {
		// A stream's body is chunked; net/http would write its last
		// chunk when the handler returns.
		_, _ = brw.WriteString("0\r\n\r\n")
	}
	if brw.Flush() != nil {
		_ = conn.Close()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.abandoned() {
		_ = conn.Close() // an abandoned server keeps no connection alive
		return
	}
	c.kept[conn] = struct{}{}
	c.wg.Add(1)
	go s.linger(conn, brw.Reader)
}

// linger waits for the first byte of the client's next request on a kept
// connection, then closes it: first its sending half, so the client reads
// EOF, then, once the client has closed its end or drainFor has passed,
// the whole connection. The rest of the request is read and dropped, as
// closing with unread bytes would send a reset instead of the EOF.
func (s *Server) linger(conn net.Conn, br *bufio.Reader) {
	c := &s.conns
	defer c.wg.Done()
	defer func() {
		c.mu.Lock()
		delete(c.kept, conn)
		c.mu.Unlock()
		_ = conn.Close()
	}()
	_ = conn.SetReadDeadline(time.Now().Add(keptIdle))
	if _, err := br.ReadByte(); err != nil {
		return // the client closed it, it idled out, or s closed it
	}
	c.droppedReuses.Add(1)
	if cw, ok := conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(drainFor))
		_, _ = io.CopyN(io.Discard, br, maxBodyBytes+1<<20)
	}
}

// closeKeptLocked closes the kept connections; their goroutines then end.
// c.mu is held.
func (c *conns) closeKeptLocked() {
	for conn := range c.kept {
		_ = conn.Close()
	}
}

// closeKept closes the kept connections (a restart cuts them too).
func (c *conns) closeKept() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeKeptLocked()
}

// serve registers Serve's server and listener, for Abandon to close; it
// reports false, registering nothing, when s is abandoned already.
func (c *conns) serve(srv *http.Server, ln net.Listener) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if isDone(c.abandon) {
		return false
	}
	c.serving[srv] = ln
	return true
}

func (c *conns) unserve(srv *http.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.serving, srv)
}
