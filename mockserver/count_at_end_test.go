package mockserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestCountTokensAtEnd: with CountTokensAtEnd, as llm-d-inference-sim,
// vllm:generation_tokens_total is absent until the first answer is
// finished, an answer in progress adds nothing to it, and a finished one
// adds all its tokens at once.
func TestCountTokensAtEnd(t *testing.T) {
	const gen = "vllm:generation_tokens_total"
	s, ts := start(t, Options{TokenDelay: 2 * time.Millisecond, MeanTokens: 100000, CountTokensAtEnd: true})
	if _, ok := scrape(t, ts.URL)[gen]; ok {
		t.Errorf("%s on /metrics before any answer is finished", gen)
	}
	for i := range 2 {
		body, _ := json.Marshal(map[string]any{"messages": userMessages("go"), "max_tokens": 100, "stream": true})
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		for range 20 { // the role chunk and a few tokens, each as its own frame
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		mid, ok := scrape(t, ts.URL)[gen]
		if want := float64(100 * i); ok != (i > 0) || mid != want {
			t.Errorf("answer %d in progress: %s = %v (on /metrics: %v), want %v, there from the first answer's end", i, gen, mid, ok, want)
		}
		_, _ = io.Copy(io.Discard, r)
		resp.Body.Close()
		if got := scrape(t, ts.URL)[gen]; got != float64(100*(i+1)) {
			t.Errorf("after answer %d: %s = %v, want %d", i, gen, got, 100*(i+1))
		}
	}
	if got := s.Stats().GenerationTokens; got != 200 {
		t.Errorf("Stats.GenerationTokens = %d, want 200", got)
	}
}
