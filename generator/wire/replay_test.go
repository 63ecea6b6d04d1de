package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// droppingServer answers the first request on each connection and then,
// when the next request on that connection has arrived, closes it without
// a byte of answer: a keep-alive connection the server dropped just as the
// client sent on it (llama-server closes many after an answer). It records
// the Idempotency-Key of each request it read.
type droppingServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	keys []string
}

const droppedAnswer = `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

func (s *droppingServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() {
			defer c.Close()
			br := bufio.NewReader(c)
			for i := 0; ; i++ {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				s.mu.Lock()
				s.keys = append(s.keys, req.Header.Get("Idempotency-Key"))
				s.mu.Unlock()
				if i == 1 {
					return // the second request on this connection: dropped
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(droppedAnswer), droppedAnswer)
			}
		})
	}
}

// TestKeepAliveDropIsReplayed: a request that meets a keep-alive connection
// the server dropped (EOF before any byte) is sent again on a new
// connection by net/http, because it carries an Idempotency-Key, and never
// reaches the engine as a failed attempt. Each request has its own key.
func TestKeepAliveDropIsReplayed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &droppingServer{ln: ln}
	served := make(chan struct{})
	go func() { s.serve(); close(served) }()
	c := New(Options{BaseURL: "http://" + ln.Addr().String() + "/v1", MaxConns: 1})
	t.Cleanup(func() {
		c.hc.CloseIdleConnections() // the server's connection goroutines end on EOF
		ln.Close()
		<-served
		s.wg.Wait()
	})
	req := Request{Messages: nil}
	req.Model, req.MaxTokens = "m", 8
	for i := range 6 {
		if _, err := c.Complete(context.Background(), req, nil); err != nil {
			t.Fatalf("request %d: %v (a dropped keep-alive connection must be replayed, not failed)", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]int{}
	for _, k := range s.keys {
		if k == "" {
			t.Fatal("a request without an Idempotency-Key")
		}
		seen[k]++
	}
	// Each dropped request arrived twice under one key (its replay); no
	// two requests share one.
	replays := 0
	for _, n := range seen {
		if n > 2 {
			t.Errorf("one key seen %d times", n)
		}
		if n == 2 {
			replays++
		}
	}
	if len(seen) != 6 || replays == 0 {
		t.Errorf("%d keys for 6 requests, %d replayed; want 6 keys and some replays (the server saw %d requests)", len(seen), replays, len(s.keys))
	}
}
