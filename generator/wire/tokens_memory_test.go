package wire

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The memory a streamed answer's tokens hold while it is in flight: the
// figure of docs/training-data.md. SYNTHGEN_TEST_TOKENS_MEMORY=full measures the issue's
// case, 200 answers of 8,192 tokens at 20 logprobs in flight at once;
// without it, 5 in flight (a request's memory does not depend on how
// many others there are).
//
//	SYNTHGEN_TEST_TOKENS_MEMORY=full go test -run TestTokensMemoryInFlight -v ./generator/wire/

const (
	memTokens = 8192
	memK      = 20
	// tokenBytesFloor is what a token at memK alternatives needs flat: its
	// id, its logprob, where its alternatives end, and the alternatives'
	// ids and logprobs.
	tokenBytesFloor = 4 + 4 + 4 + memK*(4+4)
)

// heldStream serves payload, then holds the stream open until release is
// closed, then finishes it.
func heldStream(payload string, release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, payload)
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, finishChunk)
		_, _ = io.WriteString(w, usageChunk(256, memTokens))
		_, _ = io.WriteString(w, doneChunk)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// inFlight runs n streams of payload at once and returns the live heap
// while all of them have read every token but not finished, and once they
// finished with their answers kept, each over the heap before.
func inFlight(t *testing.T, n int, payload string, ids bool) (during, after float64) {
	t.Helper()
	release := make(chan struct{})
	s := httptest.NewServer(heldStream(payload, release))
	defer s.Close()
	c := New(Options{BaseURL: s.URL, MaxConns: n})
	req := userReq(true)
	req.MaxTokens = memTokens
	req.ReturnTokenIDs, req.Logprobs = ids, map[bool]int{true: memK, false: 0}[ids]
	before := liveHeap()
	var (
		deltas atomic.Int64
		wg     sync.WaitGroup
		errs   = make([]error, n)
		resps  = make([]Response, n)
	)
	for i := range n {
		wg.Go(func() {
			resps[i], errs[i] = c.Complete(context.Background(), req, func(n int) { deltas.Add(int64(n)) })
		})
	}
	deadline := time.Now().Add(5 * time.Minute) // a bound for a failure, not a wait
	for deltas.Load() < int64(n*memTokens) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("%d of %d tokens read in 5 minutes", deltas.Load(), n*memTokens)
		}
		time.Sleep(20 * time.Millisecond)
	}
	during = float64(liveHeap()-before) / float64(n)
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if ids && (len(resps[i].TokenIDs) != memTokens || resps[i].Logprobs == nil || resps[i].TokenIDsMismatch != "") {
			t.Fatalf("stream %d: %d ids, mismatch %q", i, len(resps[i].TokenIDs), resps[i].TokenIDsMismatch)
		}
	}
	after = float64(liveHeap()-before) / float64(n)
	runtime.KeepAlive(resps)
	return during, after
}

// TestTokensMemoryInFlight: a streamed answer's ids and 20 logprobs hold
// at most 1.3 times what its tokens need flat (tokenBytesFloor a token:
// append's growth is the rest) while it streams, and its record's nested
// lists 48 bytes a token more (two slice headers) once it is whole.
func TestTokensMemoryInFlight(t *testing.T) {
	n := 5
	if os.Getenv("SYNTHGEN_TEST_TOKENS_MEMORY") == "full" {
		n = 200
	} else if testing.Short() {
		t.Skip("-short: streams 80K chunks")
	}
	text := tokenStreamPayload(memTokens, 0)
	text = text[:strings.LastIndex(text, "data: {\"id\":\"chatcmpl-9c1d5e0f2a7b4c3d\",\"object\":\"chat.completion.chunk\",\"created\":1767593900,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{},")]
	tokens := tokenStreamPayload(memTokens, memK)
	tokens = tokens[:strings.LastIndex(tokens, "data: {\"id\":\"chatcmpl-9c1d5e0f2a7b4c3d\",\"object\":\"chat.completion.chunk\",\"created\":1767593900,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{},")]

	textDuring, textAfter := inFlight(t, n, text, false)
	tokDuring, tokAfter := inFlight(t, n, tokens, true)
	perToken := func(b float64) float64 { return b / memTokens }
	streaming := perToken(tokDuring - textDuring)
	whole := perToken(tokAfter - textAfter)
	t.Logf("%d streams of %d tokens at %d logprobs in flight: %.1f MB live heap (%.2f MB a stream; %.2f MB without ids and logprobs)",
		n, memTokens, memK, tokDuring*float64(n)/(1<<20), tokDuring/(1<<20), textDuring/(1<<20))
	t.Logf("ids and logprobs: %.0f bytes a token while streaming (flat: %d), %.0f once the answer is whole (its record's lists)",
		streaming, tokenBytesFloor, whole)
	if streaming > 1.3*tokenBytesFloor {
		t.Errorf("%.0f bytes a token in flight, want at most %.0f (1.3 x %d)", streaming, 1.3*tokenBytesFloor, tokenBytesFloor)
	}
	if whole > 1.3*tokenBytesFloor+48 {
		t.Errorf("%.0f bytes a token in a whole answer, want at most %.0f", whole, 1.3*tokenBytesFloor+48)
	}
	if streaming < tokenBytesFloor*0.9 {
		t.Errorf("%.0f bytes a token: less than the tokens need; the measure is wrong", streaming)
	}
}
