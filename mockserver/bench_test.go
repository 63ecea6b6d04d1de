package mockserver

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// benchBody asks for a 300-token answer every time: a huge mean makes every
// draw longer than max_tokens.
func benchBody(stream bool) []byte {
	if stream {
		return []byte(`{"model":"mock-model","messages":[{"role":"user","content":"benchmark prompt"}],"max_tokens":300,"stream":true}`)
	}
	return []byte(`{"model":"mock-model","messages":[{"role":"user","content":"benchmark prompt"}],"max_tokens":300}`)
}

// BenchmarkLoopback drives the handler over a real loopback HTTP server with
// a minimal client (keep-alive, body read to its end), as the engine would.
// req/s is for the whole loop, client included, on however many cores run it.
func BenchmarkLoopback(b *testing.B) {
	for _, mode := range []struct {
		name   string
		stream bool
	}{{"plain", false}, {"stream", true}} {
		b.Run(mode.name, func(b *testing.B) {
			_, ts := start(b, Options{MeanTokens: 1 << 16})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			body := benchBody(mode.stream)
			b.ReportAllocs()
			b.ResetTimer()
			t0 := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || n < 300 {
						b.Errorf("status %d, %d bytes", resp.StatusCode, n)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "req/s")
		})
	}
}

// discardWriter is a reusable ResponseWriter that counts bytes, so
// BenchmarkHandler measures the handler's own cost and allocations.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

// BenchmarkHandler is the handler alone: decode, generate 300 tokens,
// assemble the response.
func BenchmarkHandler(b *testing.B) {
	for _, mode := range []struct {
		name   string
		stream bool
	}{{"plain", false}, {"stream", true}} {
		b.Run(mode.name, func(b *testing.B) {
			s := New(Options{MeanTokens: 1 << 16})
			body := benchBody(mode.stream)
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			w := &discardWriter{h: http.Header{}}
			br := bytes.NewReader(body)
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(body)
				r.Body = io.NopCloser(br)
				s.handleChat(w, r)
			}
			b.ReportMetric(float64(w.n)/float64(b.N), "B/answer")
		})
	}
}

// BenchmarkSSELines is the floor a streaming client pays: split the stream
// into lines and nothing else. Compare with the engine's decoder.
func BenchmarkSSELines(b *testing.B) {
	s := New(Options{MeanTokens: 1 << 16})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(benchBody(true))))
	stream := rec.Body.Bytes()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(stream))
		lines := 0
		for sc.Scan() {
			lines++
		}
		if lines < 600 {
			b.Fatalf("%d lines", lines)
		}
	}
}
