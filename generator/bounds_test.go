package generator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
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
			c := s.client(wireOptions{HTTPClient: &http.Client{Transport: tr}})
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
