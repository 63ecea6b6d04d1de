package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var mockServingRe = regexp.MustCompile(`mock: serving \S+ on http://(\S+)/v1`)

// mockRequest posts a streamed chat request on a new connection to addr and
// returns the connection, so the test sees every byte that comes back.
func mockRequest(t *testing.T, addr, text string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"stream":true}`, text)
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	return conn
}

// mockGauges polls the mock's /metrics until running and waiting requests
// are as wanted.
func mockGauges(t *testing.T, addr string, running, waiting int) {
	t.Helper()
	want := []string{fmt.Sprintf("vllm:num_requests_running{engine=\"0\",model_name=\"mock-model\"} %d\n", running),
		fmt.Sprintf("vllm:num_requests_waiting{engine=\"0\",model_name=\"mock-model\"} %d\n", waiting)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), want[0]) && strings.Contains(string(b), want[1]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mock /metrics never showed %d running, %d waiting:\n%s", running, waiting, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMockAbandonOnTerm: `synthgen mock --abandon-on-term` on SIGTERM stops
// listening at once (another server may bind the port while it lives on),
// holds its queued request open without a byte (--headers-when-running:
// not even headers) while its running one goes on, and a Ctrl-C then ends
// it at once, closing the held connection still without a byte.
func TestMockAbandonOnTerm(t *testing.T) {
	p := startSynthgen(t, "mock", "mock", "--addr", "127.0.0.1:0", "--max-running", "1", "--ttft", "1m",
		"--headers-when-running", "--abandon-on-term", "--grace", "10m")
	p.waitForOutput(t, true, mockServingRe, 30*time.Second)
	addr := mockServingRe.FindStringSubmatch(p.stderr(t))[1]

	running := mockRequest(t, addr, "running")
	mockGauges(t, addr, 1, 0)
	queued := mockRequest(t, addr, "queued")
	mockGauges(t, addr, 1, 1)
	queuedRead := make(chan int, 1)
	go func() {
		n, _ := io.Copy(io.Discard, queued)
		queuedRead <- int(n)
	}()

	p.signal(t, syscall.SIGTERM)
	p.waitForOutput(t, true, regexp.MustCompile(`mock: SIGTERM: stopped listening`), 30*time.Second)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port after SIGTERM: %v", err)
	}
	ln.Close()
	if p.exited() {
		t.Fatalf("mock exited on SIGTERM; stderr:\n%s", p.stderr(t))
	}
	select {
	case n := <-queuedRead:
		t.Fatalf("the queued request's connection ended (%d bytes) while the mock holds it", n)
	default:
	}
	// The running request runs on: its headers came when it started.
	running.SetReadDeadline(time.Now().Add(10 * time.Second))
	head := make([]byte, 15)
	if _, err := io.ReadFull(running, head); err != nil || string(head) != "HTTP/1.1 200 OK" {
		t.Fatalf("running request: %q %v", head, err)
	}

	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit code %d after Ctrl-C, want 0; stderr:\n%s", code, p.stderr(t))
	}
	select {
	case n := <-queuedRead:
		if n != 0 {
			t.Errorf("the held request got %d bytes, want none", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held connection is still open after the mock exited")
	}
}
