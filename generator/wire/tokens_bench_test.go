//go:build unix

package wire

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// BenchmarkStreamTokens runs a whole streamed Complete of 512 tokens with
// no ids (as BenchmarkStreamDecoder), with ids, and with ids and 20
// logprobs a token, against one in-process server: cpu-ns/chunk is the
// process's CPU time (the server's writing included) per chunk, B/op what
// one answer allocates.
func BenchmarkStreamTokens(b *testing.B) {
	const textChunks = 512
	for _, tc := range []struct {
		name    string
		payload string
		ids     bool
		k       int
	}{
		{"tokens=none", benchStreamPayload(textChunks), false, 0},
		{"tokens=ids", tokenStreamPayload(textChunks, 0), true, 0},
		{"tokens=ids+logprobs20", tokenStreamPayload(textChunks, 20), true, 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.payload)
			}))
			defer s.Close()
			req := userReq(true)
			req.MaxTokens = 1024
			req.ReturnTokenIDs, req.Logprobs = tc.ids, tc.k
			c := New(Options{BaseURL: s.URL + "/v1", MaxConns: 4})
			b.SetBytes(int64(len(tc.payload)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				resp, err := c.Complete(context.Background(), req, nil)
				if err != nil || resp.Chunks != textChunks || tc.ids && len(resp.TokenIDs) != textChunks || resp.TokenIDsMismatch != "" {
					b.Fatalf("chunks %d ids %d mismatch %q err %v", resp.Chunks, len(resp.TokenIDs), resp.TokenIDsMismatch, err)
				}
			}
			n := float64(b.N * (textChunks + 2))
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n, "cpu-ns/chunk")
		})
	}
}

// BenchmarkDecodeTokenChunk is one vLLM chunk with ids and 20 logprobs
// through the fast path (the stream's reused buffer) and through
// encoding/json.
func BenchmarkDecodeTokenChunk(b *testing.B) {
	data := []byte(vllmTokenChunk(4096, 20))
	b.Run("decoder=chunkscan", func(b *testing.B) {
		var tb codec.TokenBuf
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeChunkInto(data, &tb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder=encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeChunkReference(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
