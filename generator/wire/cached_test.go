package wire

import (
	"context"
	"fmt"
	"net/http"
	"testing"
)

// cachedUsage is a usage object in OpenAI's shape (vLLM's is the same with
// --enable-prompt-tokens-details): prompt_tokens counts the cached ones too.
const cachedUsage = `{"prompt_tokens":125,"completion_tokens":48,"total_tokens":173,"prompt_tokens_details":{"text_tokens":125,"audio_tokens":0,"image_tokens":0,"cached_tokens":98},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}`

// TestCompleteCachedTokens: the prompt's cached tokens reach the Response,
// from a stream whose usage comes alone in its last chunk and from a plain
// answer.
func TestCompleteCachedTokens(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if !stream {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":%s}`, cachedUsage)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`+"\n\n")
				fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`+"\n\n")
				fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", cachedUsage)
			})
			got, err := s.client(Options{}).Complete(context.Background(), userReq(stream), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.PromptTokens != 125 || got.CompletionTokens != 48 || got.CachedTokens != 98 {
				t.Errorf("usage prompt %d completion %d cached %d, want 125 48 98", got.PromptTokens, got.CompletionTokens, got.CachedTokens)
			}
		})
	}
}

// TestScanChunkReadsCachedTokens: the usage chunk with details stays on the
// fast path and carries the count.
func TestScanChunkReadsCachedTokens(t *testing.T) {
	t.Parallel()
	chunk := []byte(`{"choices":[],"usage":` + cachedUsage + `}`)
	d, ok := scanChunk(chunk)
	if !ok {
		t.Fatal("a usage chunk with prompt_tokens_details went to the reference")
	}
	if d.CachedTokens != 98 || d.PromptTokens != 125 {
		t.Errorf("cached %d prompt %d, want 98 125", d.CachedTokens, d.PromptTokens)
	}
}

// BenchmarkDecodeUsageChunk is a stream's last chunk with usage and its
// prompt_tokens_details, on the fast path; BenchmarkDecodeUsageChunkReference
// the same through encoding/json, for the ratio within one run.
func BenchmarkDecodeUsageChunk(b *testing.B) {
	chunk := []byte(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":` + cachedUsage + `}`)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeChunk(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeUsageChunkReference(b *testing.B) {
	chunk := []byte(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":` + cachedUsage + `}`)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeChunkReference(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
