package wire

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkPlain is one plain Complete (the request body, the http.Client,
// the answer's scan) beside a loop that posts the same body and reads
// the answer into io.Discard, as bench's yardstick does, against the same
// server. The server runs in the process, so its cost is in both.
func BenchmarkPlain(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","reasoning":null,"content":"` +
		string(bytes.Repeat([]byte("word "), 64)) + `"},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":64,"total_tokens":84}}`)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write(answer)
	}))
	b.Cleanup(s.Close)
	req := userReq(false)

	b.Run("complete", func(b *testing.B) {
		c := New(Options{BaseURL: s.URL + "/v1", MaxConns: 4, Timeout: 600e9})
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Complete(context.Background(), req, nil)
			if err != nil || resp.CompletionTokens != 64 {
				b.Fatalf("completion tokens %d, err %v", resp.CompletionTokens, err)
			}
		}
	})
	b.Run("post_only", func(b *testing.B) {
		hc := &http.Client{Transport: NewTransport(4, nil)}
		body, err := EncodeRequest(req)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			r, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/chat/completions", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(r)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
