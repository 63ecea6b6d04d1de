package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport counts the response body bytes the client read.
type countingTransport struct {
	read atomic.Int64
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &c.read}
	}
	return resp, err
}

// TestErrorBodyBounded: a 10 MB error body is neither read whole nor kept
// whole: the message is its first 4 KiB and says it was cut, and from how
// much.
func TestErrorBodyBounded(t *testing.T) {
	const size = 10 << 20
	huge := strings.Repeat("<p>proxy error</p>", size/18+1)[:size]
	for _, tc := range []struct {
		name   string
		length bool // Content-Length sent
		body   string
		want   string
	}{
		{"html with length", true, huge, fmt.Sprintf("... (cut: %d bytes)", size)},
		{"chunked json", false, `{"error":{"message":"` + huge + `"}}`, fmt.Sprintf("... (cut: more than %d bytes)", maxErrorBody)},
		{"json message under the read bound", true, `{"error":{"message":"` + huge[:20000] + `"}}`, "... (cut: 20000 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.length {
					w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				}
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, tc.body) // fails once the client closes
			})
			tr := &countingTransport{}
			c := s.client(Options{HTTPClient: &http.Client{Transport: tr}})
			_, err := c.Complete(context.Background(), userReq(false), nil)
			e := asError(t, err, "http_500", true)
			if !strings.HasSuffix(e.Message, tc.want) || len(e.Message) > maxMessage+len(tc.want) {
				t.Errorf("message of %d bytes ending %q, want at most %d ending %q",
					len(e.Message), e.Message[max(0, len(e.Message)-60):], maxMessage+len(tc.want), tc.want)
			}
			if len(e.Error()) > maxMessage+200 {
				t.Errorf("error text of %d bytes", len(e.Error()))
			}
			// The read bound, plus what one read of the transport's
			// buffer may bring along.
			if n := tr.read.Load(); n > maxErrorBody+64<<10 {
				t.Errorf("read %d bytes of the error body, want at most about %d", n, maxErrorBody)
			}
		})
	}
}

// TestEndlessAnswerCut: a stream that never sends a finish_reason is cut
// once it brings more than max_tokens allows, by bytes (4 KB deltas) or by
// chunks (one-byte deltas), as a retryable "overlong"; the server sees the
// client go away.
func TestEndlessAnswerCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta string
	}{
		{"4 KB deltas", strings.Repeat("x", 4096)},
		{"1 byte deltas", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int64
			ended := make(chan struct{})
			chunk := fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", tc.delta)
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				defer close(ended)
				w.Header().Set("Content-Type", "text/event-stream")
				for r.Context().Err() == nil { // forever, until the client goes away
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					sent.Add(1)
				}
			})
			req := userReq(true) // max_tokens 64
			// A generous bound: without the cut the answer never ends, and
			// the test fails on the cause (timeout) instead of hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var accepted int
			_, err := s.client(Options{}).Complete(ctx, req, func(n int) { accepted += n })
			e := asError(t, err, CauseOverlong, true)
			if !strings.Contains(e.Message, "max_tokens 64") {
				t.Errorf("message %q does not name max_tokens", e.Message)
			}
			// The cut comes at the first chunk past either bound: 4 KB
			// deltas pass the byte bound long before the chunk bound.
			b := newAnswerBound(req)
			want := min(b.chunks, b.bytes/len(tc.delta))
			if accepted != want {
				t.Errorf("cut after %d text chunks, want %d (bounds: %d chunks, %d bytes)", accepted, want, b.chunks, b.bytes)
			}
			select {
			case <-ended:
			case <-time.After(30 * time.Second): // generous: the cut closes the connection at once
				t.Fatalf("the server still streams after %d chunks", sent.Load())
			}
		})
	}
	t.Run("a row's max_tokens sets the bound", func(t *testing.T) {
		req := userReq(true)
		req.Params = map[string]any{"max_tokens": json.Number("4096")}
		if b := newAnswerBound(req); b.maxTokens != 4096 || b.chunks != 4096+64 {
			t.Errorf("bound %+v, want the row's 4096", b)
		}
		req.Params = nil
		req.MaxTokens = 0
		if b := newAnswerBound(req); b.maxTokens != unboundedTokens {
			t.Errorf("bound %+v without max_tokens, want %d", b, unboundedTokens)
		}
	})
}
