package mockserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

// startClosing is start for the tests of conn.go: s is closed before the
// httptest server, which would wait for what s holds.
func startClosing(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(s.Close) // runs first
	return s, ts
}

// chatBody is a request body for a short answer.
func chatBody(t *testing.T, text string, stream bool) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"messages": userMessages(text), "stream": stream, "max_tokens": 20})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawRequest writes a chat completion request on a new TCP connection to
// addr and returns the connection, so the test sees every byte that comes
// back, or that none does.
func rawRequest(t *testing.T, addr, text string, stream bool) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := chatBody(t, text, stream)
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readResult is the first read of a connection: what came, or how it ended.
type readResult struct {
	data []byte
	err  error
}

// firstRead reads conn once in the background.
func firstRead(conn net.Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		b := make([]byte, 4096)
		n, err := conn.Read(b)
		ch <- readResult{b[:n], err}
	}()
	return ch
}

// waitRead waits for a first read, failing after a generous bound.
func waitRead(t *testing.T, ch <-chan readResult, what string) readResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing read within 10s", what)
		return readResult{}
	}
}

// noByteYet fails when ch has delivered a read: the connection must still
// be open and silent.
func noByteYet(t *testing.T, ch <-chan readResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: read %q (err %v), want the connection open and silent", what, r.data, r.err)
	default:
	}
}

// roundTrip makes the server answer another request, so that bytes a
// connection was sent before it have had every chance to arrive.
func roundTrip(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestHeadersWhenRunning: with HeadersWhenRunning a queued stream gets no
// byte, not even its status line, until it runs, and then gets its
// headers at once (before its first token, TTFT later); without it the
// headers come while it is queued, as vLLM sends them. A queued client
// that leaves gives its place up either way. Both schedulers: the FIFO
// slots and the batch model.
func TestHeadersWhenRunning(t *testing.T) {
	for _, sched := range []string{"slots", "batch"} {
		for _, held := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/held=%v", sched, held), func(t *testing.T) {
				opts := Options{MaxRunning: 1, TTFT: time.Minute, HeadersWhenRunning: held}
				if sched == "batch" {
					opts.BatchScale = 1 // the batch model, still one at a time
				}
				s, ts := startClosing(t, opts)
				addr := ts.Listener.Addr().String()

				a := rawRequest(t, addr, "first", true)
				aRead := firstRead(a)
				waitFor(t, "the first request running", func() bool { return s.Stats().Running == 1 })
				if r := waitRead(t, aRead, "the running stream"); !bytes.HasPrefix(r.data, []byte("HTTP/1.1 200 OK\r\n")) {
					t.Fatalf("running stream: %q %v, want its headers", r.data, r.err)
				}

				b := rawRequest(t, addr, "second", true)
				bRead := firstRead(b)
				waitFor(t, "the second request queued", func() bool { return s.Stats().Waiting == 1 })
				if !held {
					r := waitRead(t, bRead, "the queued stream")
					if !bytes.HasPrefix(r.data, []byte("HTTP/1.1 200 OK\r\n")) || s.Stats().Waiting != 1 {
						t.Fatalf("queued stream read %q (err %v, %+v), want vLLM's headers while queued", r.data, r.err, s.Stats())
					}
					return
				}
				c := rawRequest(t, addr, "third", true)
				waitFor(t, "the third request queued", func() bool { return s.Stats().Waiting == 2 })
				roundTrip(t, ts.URL)
				noByteYet(t, bRead, "queued stream")

				// A queued client that leaves is seen without a byte sent.
				c.Close()
				waitFor(t, "the third request aborted", func() bool { st := s.Stats(); return st.Aborted == 1 && st.Waiting == 1 })
				noByteYet(t, bRead, "queued stream")

				a.Close() // the running request ends: the queued one runs
				r := waitRead(t, bRead, "the stream once running")
				if !bytes.HasPrefix(r.data, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.Contains(r.data, []byte("text/event-stream")) {
					t.Fatalf("stream once running read %q (err %v), want its headers", r.data, r.err)
				}
				if st := s.Stats(); st.Running != 1 || st.Waiting != 0 || st.GenerationTokens != 0 {
					t.Errorf("headers came, but %+v: want it running, before its first token", st)
				}
			})
		}
	}
}

// connTrace records, for each connection a request got, whether it was a
// reused one.
type connTrace struct {
	mu     sync.Mutex
	reused []bool
}

func (c *connTrace) take() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reused
	c.reused = nil
	return r
}

// keepAliveClient is one kept-alive connection at a time, as a client
// that reuses it for every request.
func keepAliveClient(t *testing.T) (*http.Client, *connTrace) {
	t.Helper()
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, &connTrace{}
}

// postOn sends a chat request with client and reads the whole answer; with
// idempotent it carries an Idempotency-Key, which lets net/http replay it.
func postOn(t *testing.T, client *http.Client, tr *connTrace, url string, stream, idempotent bool) (*http.Response, []byte, error) {
	t.Helper()
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			tr.mu.Lock()
			tr.reused = append(tr.reused, info.Reused)
			tr.mu.Unlock()
		},
	})
	// bytes.Reader: NewRequest sets GetBody, so a replay can rewind it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(chatBody(t, "close me", stream)))
	if err != nil {
		t.Fatal(err)
	}
	if idempotent {
		req.Header.Set("Idempotency-Key", "k1")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// complete checks that an answer arrived whole and did not announce the
// close.
func complete(t *testing.T, what string, resp *http.Response, body []byte, err error, stream bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	whole := json.Valid(body) && bytes.Contains(body, []byte(`"finish_reason":"`))
	if stream {
		whole = bytes.HasSuffix(body, doneFrame) && bytes.Contains(body, []byte(`"finish_reason":"`))
	}
	if resp.StatusCode != 200 || !whole {
		t.Fatalf("%s: status %d, body %q: want a whole answer", what, resp.StatusCode, body)
	}
	if resp.Close || resp.Header.Get("Connection") != "" {
		t.Fatalf("%s: the answer announced the close (Connection %q)", what, resp.Header.Get("Connection"))
	}
}

// TestRateCloseAfter: with RateCloseAfter 1 every answer arrives whole,
// without "Connection: close", and the client's next request on the kept
// connection reads EOF before any byte: net/http's client returns an error
// wrapping io.EOF for a plain POST, and replays a POST that carries an
// Idempotency-Key on a new connection, so the caller sees its answer.
func TestRateCloseAfter(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			s, ts := startClosing(t, Options{MeanTokens: 20, RateCloseAfter: 1})
			client, tr := keepAliveClient(t)

			resp, body, err := postOn(t, client, tr, ts.URL, stream, false)
			complete(t, "first answer", resp, body, err, stream)
			if got := tr.take(); len(got) != 1 || got[0] {
				t.Fatalf("first request's connections (reused?) %v, want one new", got)
			}

			_, _, err = postOn(t, client, tr, ts.URL, stream, false)
			if err == nil || !errors.Is(err, io.EOF) {
				t.Fatalf("second POST on the kept connection: err %v, want one wrapping io.EOF", err)
			}
			t.Logf("second POST on the kept connection: %v", err)
			if got := tr.take(); len(got) != 1 || !got[0] {
				t.Fatalf("second request's connections (reused?) %v, want the kept one only: no replay", got)
			}
			waitFor(t, "the dropped reuse counted", func() bool { return s.Stats().DroppedReuses == 1 })

			resp, body, err = postOn(t, client, tr, ts.URL, stream, false)
			complete(t, "third answer, on a new connection", resp, body, err, stream)
			if got := tr.take(); len(got) != 1 || got[0] {
				t.Fatalf("third request's connections (reused?) %v, want one new", got)
			}

			resp, body, err = postOn(t, client, tr, ts.URL, stream, true)
			complete(t, "fourth answer, replayed", resp, body, err, stream)
			if got := tr.take(); len(got) != 2 || !got[0] || got[1] {
				t.Fatalf("fourth request's connections (reused?) %v, want the kept one, then a new one", got)
			}

			st := s.Stats()
			if st.Requests != 3 || st.Completed != 3 || st.ClosedAfter != 3 || st.DroppedReuses != 2 {
				t.Errorf("stats %+v: want 3 requests answered, 3 closed after, 2 reuses dropped", st)
			}
		})
	}
}

// TestRateCloseAfterIsDrawn: which answers close is a pure function of
// Seed and the arrival number, about RateCloseAfter of them, independent
// of the fault draw; over a kept-alive client replaying with an
// Idempotency-Key, the connections dialled are exactly one plus the closes
// the draw makes (the last answer's close is never reused).
func TestRateCloseAfterIsDrawn(t *testing.T) {
	const rate, n = 0.3, 4000
	a := New(Options{RateCloseAfter: rate, Seed: 5})
	b := New(Options{RateCloseAfter: rate, Seed: 5, Rate500: 0.5})
	c := New(Options{RateCloseAfter: rate, Seed: 6})
	closes, differ := 0, 0
	for id := uint64(1); id <= n; id++ {
		if a.closesAfter(id) != b.closesAfter(id) {
			t.Fatalf("request %d: the close draw depends on the fault rates", id)
		}
		if a.closesAfter(id) {
			closes++
		}
		if a.closesAfter(id) != c.closesAfter(id) {
			differ++
		}
	}
	if share := float64(closes) / n; share < rate-0.03 || share > rate+0.03 {
		t.Errorf("%d of %d answers close (%.3f), want about %v", closes, n, share, rate)
	}
	if differ == 0 {
		t.Error("seeds 5 and 6 close the same answers")
	}

	const requests = 30
	s, ts := startClosing(t, Options{MeanTokens: 10, RateCloseAfter: 0.5, Seed: 9})
	client, tr := keepAliveClient(t)
	dialled := 0
	for i := range requests {
		resp, body, err := postOn(t, client, tr, ts.URL, i%2 == 0, true)
		complete(t, fmt.Sprintf("answer %d", i), resp, body, err, i%2 == 0)
		for _, reused := range tr.take() {
			if !reused {
				dialled++
			}
		}
	}
	want := 1
	for id := uint64(1); id < requests; id++ {
		if s.closesAfter(id) {
			want++
		}
	}
	if dialled != want {
		t.Errorf("%d connections dialled for %d requests, want %d: one plus the draw's closes", dialled, requests, want)
	}
	if st := s.Stats(); st.DroppedReuses != int64(want-1) || st.Requests != requests {
		t.Errorf("stats %+v: want %d reuses dropped, %d requests", st, want-1, requests)
	}
}

// TestAbandon: Abandon closes Serve's listener at once, so a new Server
// serves on the same port and answers new requests, while the old one
// goes on with its running request and holds its queued ones open without
// a byte (even once a slot is free) until its Serve context ends; then
// they are closed, still without a byte.
func TestAbandon(t *testing.T) {
	old := New(Options{MaxRunning: 1, TokenDelay: time.Millisecond, MeanTokens: 1 << 20, HeadersWhenRunning: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	url := "http://" + addr
	oldCtx, stopOld := context.WithCancel(context.Background())
	oldServed := make(chan error, 1)
	go func() { oldServed <- old.Serve(oldCtx, ln, time.Second) }()
	endOld := sync.OnceValue(func() error { stopOld(); return <-oldServed })
	defer endOld()

	// One running stream, three queued requests.
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	resp := post(t, runCtx, url, map[string]any{"messages": userMessages("long"), "stream": true, "max_tokens": 100000})
	defer resp.Body.Close()
	running := bufio.NewReader(resp.Body)
	var queued []<-chan readResult
	for i := range 3 {
		queued = append(queued, firstRead(rawRequest(t, addr, fmt.Sprintf("queued %d", i), i%2 == 0)))
	}
	waitFor(t, "3 queued", func() bool { return old.Stats().Waiting == 3 })

	old.Abandon()
	ln2, err := net.Listen("tcp", addr) // at once: no retry
	if err != nil {
		t.Fatalf("listen on the abandoned address: %v", err)
	}
	fresh := New(Options{MeanTokens: 10})
	freshCtx, stopFresh := context.WithCancel(context.Background())
	freshServed := make(chan error, 1)
	go func() { freshServed <- fresh.Serve(freshCtx, ln2, time.Second) }()
	for i := range 3 {
		if status, _, body, err := send(t, url, i%2 == 0); err != nil || status != 200 || !bytes.Contains(body, []byte(`"finish_reason":"`)) {
			t.Fatalf("request %d after Abandon: %d %q %v", i, status, body, err)
		}
	}
	if st := fresh.Stats(); st.Completed != 3 {
		t.Errorf("the new server completed %d, want 3", st.Completed)
	}

	// The running stream goes on after Abandon.
	for range 20 {
		if _, err := running.ReadString('\n'); err != nil {
			t.Fatalf("the running stream after Abandon: %v", err)
		}
	}
	waitFor(t, "3 held", func() bool { return old.Stats().Held == 3 })
	if st := old.Stats(); st.Waiting != 0 || st.Running != 1 {
		t.Errorf("old server after Abandon: %+v, want 3 held, 1 running", st)
	}
	stopRun() // its slot is free: still nobody runs
	waitFor(t, "the running stream gone", func() bool { return old.Stats().Running == 0 && old.Stats().Aborted == 1 })
	roundTrip(t, url)
	for i, q := range queued {
		noByteYet(t, q, fmt.Sprintf("queued request %d", i))
	}
	if st := old.Stats(); st.Held != 3 || st.Running != 0 || st.Requests != 4 {
		t.Errorf("old server with its slot free: %+v, want 3 held, none running", st)
	}

	if err := endOld(); err != nil {
		t.Errorf("old Serve: %v", err)
	}
	for i, q := range queued {
		if r := waitRead(t, q, fmt.Sprintf("queued request %d", i)); len(r.data) != 0 || r.err == nil {
			t.Errorf("queued request %d at the end: read %q, err %v; want no byte, then the close", i, r.data, r.err)
		}
	}
	if st := old.Stats(); st.Held != 0 || st.Aborted != 4 || st.Completed != 0 {
		t.Errorf("old server at the end: %+v, want 4 aborted", st)
	}
	stopFresh()
	if err := <-freshServed; err != nil {
		t.Errorf("new Serve: %v", err)
	}
}

// TestAbandonMounted: on a Server mounted on an httptest server (its
// listener stays open), Abandon holds the queued requests and the ones
// that arrive later; a vLLM-style stream keeps the headers it got and no
// byte more; Close then closes them without an answer while the running
// request goes on. Both schedulers.
func TestAbandonMounted(t *testing.T) {
	for _, sched := range []string{"slots", "batch"} {
		t.Run(sched, func(t *testing.T) {
			opts := Options{MaxRunning: 1, TTFT: time.Minute}
			if sched == "batch" {
				opts.BatchScale = 1
			}
			s, ts := startClosing(t, opts)
			addr := ts.Listener.Addr().String()
			run := rawRequest(t, addr, "run", false)
			waitFor(t, "one running", func() bool { return s.Stats().Running == 1 })

			queuedStream := rawRequest(t, addr, "queued stream", true)
			br := bufio.NewReader(queuedStream)
			head, err := http.ReadResponse(br, nil)
			if err != nil || head.StatusCode != 200 {
				t.Fatalf("queued stream's headers: %v", err)
			}
			waitFor(t, "one queued", func() bool { return s.Stats().Waiting == 1 })
			s.Abandon()
			waitFor(t, "the queued one held", func() bool { return s.Stats().Held == 1 })
			later := firstRead(rawRequest(t, addr, "later", false))
			waitFor(t, "the later one held", func() bool { return s.Stats().Held == 2 })
			noByteYet(t, later, "request after Abandon")

			s.Close()
			if r := waitRead(t, later, "request after Abandon"); len(r.data) != 0 || r.err == nil {
				t.Errorf("request after Abandon at Close: %q %v, want no byte, then the close", r.data, r.err)
			}
			if rest, err := io.ReadAll(head.Body); len(rest) != 0 || err == nil {
				t.Errorf("queued stream at Close: body %q, err %v; want no byte, then a cut", rest, err)
			}
			if st := s.Stats(); st.Held != 0 || st.Aborted != 2 || st.Running != 1 {
				t.Errorf("after Close: %+v, want 2 aborted, 1 still running", st)
			}
			run.Close()
			waitFor(t, "the running one gone", func() bool { st := s.Stats(); return st.Running == 0 && st.Aborted == 3 })
		})
	}
}

// TestValidateCloseAfter: RateCloseAfter is a share.
func TestValidateCloseAfter(t *testing.T) {
	for _, r := range []float64{-0.1, 1.5} {
		err := Options{RateCloseAfter: r}.Validate()
		if err == nil || !strings.Contains(err.Error(), "close after rate") {
			t.Errorf("RateCloseAfter %v: %v", r, err)
		}
	}
	if err := (Options{RateCloseAfter: 1, Rate500: 1}).Validate(); err != nil {
		t.Errorf("RateCloseAfter is not one of the fault rates that add up to 1: %v", err)
	}
}
