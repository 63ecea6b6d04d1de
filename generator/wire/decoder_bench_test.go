//go:build unix

package wire

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// chunkDecoders are the decoders docs/decisions/2026-11-chunk-scanner.md compares, each with the same
// encoding/json fallback for what its fast path does not vouch for.
var chunkDecoders = []struct {
	name   string
	decode func([]byte) (codec.Delta, error)
}{
	{"decoder=chunkscan", func(b []byte) (codec.Delta, error) {
		if d, ok := scanChunk(b); ok {
			return d, nil
		}
		return decodeChunkReference(b)
	}},
	{"decoder=fastjson", func(b []byte) (codec.Delta, error) {
		if d, ok := fastChunk(b); ok {
			return d, nil
		}
		return decodeChunkReference(b)
	}},
	{"decoder=encoding_json", decodeChunkReference},
}

// cpuTime is the process's user+system CPU time so far: the client, the
// in-process server and the GC, all of it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreamDecoder runs a whole streamed Complete (go-openai's SSE
// reader, the chunk decoder, accumulation) once per decoder against the same
// in-process server, so the figures compare within one run. ns/chunk is
// wall time, cpu-ns/chunk the process's CPU time (server included: the
// same for every decoder), per streamed chunk.
func BenchmarkStreamDecoder(b *testing.B) {
	const textChunks = 512
	const chunks = textChunks + 2 // + the finish chunk and the usage chunk
	payload := benchStreamPayload(textChunks)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, payload)
	}))
	b.Cleanup(s.Close)
	req := userReq(true)
	// Room for every chunk: userReq's 64 tokens would have the answer cut
	// as overlong (answerBound) long before its 512 chunks.
	req.MaxTokens = 2 * textChunks
	for _, dec := range chunkDecoders {
		b.Run(dec.name, func(b *testing.B) {
			c := New(Options{BaseURL: s.URL + "/v1", MaxConns: 4})
			c.chunkDecoder = dec.decode
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				resp, err := c.Complete(context.Background(), req, nil)
				if err != nil || resp.Chunks != textChunks {
					b.Fatalf("chunks %d err %v", resp.Chunks, err)
				}
			}
			n := float64(b.N * chunks)
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n, "cpu-ns/chunk")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/chunk")
		})
	}
}

// BenchmarkDecodeVerbatim is the decode alone, on the chunk bodies of a real
// vLLM stream (testdata/stream_cut_verbatim.sse, byte for byte).
func BenchmarkDecodeVerbatim(b *testing.B) {
	chunks := sseChunks(b, "stream_cut_verbatim.sse")
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	for _, dec := range chunkDecoders {
		b.Run(dec.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					if _, err := dec.decode(c); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
		})
	}
}
