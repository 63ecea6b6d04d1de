package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// sseBodies are stream bodies as servers and proxies send them, well and
// badly: sseReader must read each as go-openai's RecvRaw does.
var sseBodies = []string{
	"data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n",
	"data:{\"a\":1}\n\ndata:\t{\"a\":2}\r\n\r\ndata:[DONE]\n",
	": keep-alive\n\n: ping\n\ndata: {\"a\":1}\n\n",                                     // comments, no [DONE]
	"data: {\"a\":1}\n\ndata: {\"a\":2}",                                                // a last line cut without its newline
	"data: {\"a\":1}\n\ndata: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\n",      // vLLM's error event
	"data: {\"error\":{\"message\":\"overloaded\",\"type\":\"x\"}}\n\ndata: [DONE]\n\n", // error event, then [DONE]
	"{\"error\":{\"message\":\"not SSE at all\",\"code\":429}}\n",                       // an error body on a 200
	"{\"error\":\n{\"message\":\"split\"}}\n",                                           // over two lines
	"<html>\nbad gateway\n</html>\n",                                                    // not JSON, not SSE
	"data: [DONE]\n\ndata: {\"after\":1}\n\n",
	"  data: {\"a\":\"padded\"}  \n\n",
	"event: message\nid: 7\ndata: {\"a\":1}\n\n",
	"data: {\"a\":\"" + strings.Repeat("x", 40<<10) + "\"}\n\ndata: [DONE]\n\n", // a line longer than the buffer
	"data: {\"a\":1}\n\ndata: [DONE]",
	"",
	"\n\n\n",
	"data:\n\ndata: \n\n",
	"data: {\"error\":null}\n\n",
	"data: {\"error\": {\"message\":\"spaced\"}}\n\n",
}

// sseOutcome is what a reader made of a body: the payloads in order, then
// how it ended.
type sseOutcome struct {
	payloads []string
	end      string // "EOF", "api: MESSAGE" or "error"
}

func endOf(err error) string {
	var apiErr *openai.APIError
	switch {
	case errors.Is(err, io.EOF) && !errors.As(err, &apiErr):
		return "EOF"
	case errors.As(err, &apiErr):
		return "api: " + apiErr.Message
	}
	return "error"
}

// viaGoOpenAI reads body with go-openai's own stream reader.
func viaGoOpenAI(t testing.TB, url string) sseOutcome {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = url
	cfg.EmptyMessagesLimit = 1 << 30 // keep-alives never end our stream either
	oa := openai.NewClientWithConfig(cfg)
	stream, err := oa.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var o sseOutcome
	for {
		raw, err := stream.RecvRaw()
		if err == nil && len(raw) == 0 {
			// Nothing and no error: an empty data line, or an error event
			// that does not decode. The client stops there (no chunk
			// decodes from nothing).
			o.end = "error"
			return o
		}
		if err != nil {
			o.end = endOf(err)
			return o
		}
		o.payloads = append(o.payloads, string(raw))
	}
}

// viaSSEReader reads body with ours.
func viaSSEReader(t testing.TB, url string) sseOutcome {
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := newSSEReader(resp.Body)
	defer r.release()
	var o sseOutcome
	for {
		raw, err := r.next()
		if err == nil && len(raw) == 0 {
			o.end = "error" // as above
			return o
		}
		if err != nil {
			o.end = endOf(err)
			return o
		}
		o.payloads = append(o.payloads, string(raw))
	}
}

func serveBody(body string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
}

func sameOutcome(t testing.TB, body string) {
	s := serveBody(body)
	defer s.Close()
	want := viaGoOpenAI(t, s.URL)
	got := viaSSEReader(t, s.URL)
	if fmt.Sprint(got.payloads) != fmt.Sprint(want.payloads) || got.end != want.end {
		short := body
		if len(short) > 200 {
			short = short[:200] + "..."
		}
		t.Errorf("body %q:\n go-openai: %d payloads, end %s\n sseReader: %d payloads, end %s",
			short, len(want.payloads), want.end, len(got.payloads), got.end)
	}
}

// TestSSEReaderMatchesGoOpenAI: for every body, our reader returns the
// payloads go-openai's RecvRaw returns, and ends the same way (end of
// stream, the same API error, or an error).
func TestSSEReaderMatchesGoOpenAI(t *testing.T) {
	for _, body := range sseBodies {
		sameOutcome(t, body)
	}
}

// FuzzSSEReader holds sseReader to go-openai's reader on any body, except
// where ours is deliberately stricter: a comment line before an error body
// (go-openai keeps the comment and then fails to decode the error).
func FuzzSSEReader(f *testing.F) {
	for _, b := range sseBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for line := range strings.Lines(body) {
			if strings.HasPrefix(strings.TrimSpace(line), ":") {
				t.Skip("a comment line: go-openai keeps it in its error buffer")
			}
		}
		sameOutcome(t, body)
	})
}

// TestSSEReaderBounds: a line with no end is cut at maxSSELine, and the
// non-data lines kept for an error stop at maxErrorBody.
func TestSSEReaderBounds(t *testing.T) {
	endless := io.MultiReader(strings.NewReader("data: "), neverNewline{})
	r := newSSEReader(endless)
	defer r.release()
	if _, err := r.next(); !errors.Is(err, errSSELine) {
		t.Fatalf("an endless line: %v, want %v", err, errSSELine)
	}

	junk := strings.Repeat("<p>not an event</p>\n", 2*maxErrorBody/20)
	r2 := newSSEReader(strings.NewReader(junk))
	defer r2.release()
	if _, err := r2.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("a page of junk: %v, want io.EOF", err)
	}
	if len(r2.errBuf) != maxErrorBody {
		t.Errorf("kept %d bytes of non-data lines, want %d", len(r2.errBuf), maxErrorBody)
	}
}

type neverNewline struct{}

func (neverNewline) Read(p []byte) (int, error) {
	copy(p, bytes.Repeat([]byte("x"), len(p)))
	return len(p), nil
}

// TestReadAllSized reads what io.ReadAll reads, whatever the announced
// size says: exact, short, long, unknown.
func TestReadAllSized(t *testing.T) {
	body := strings.Repeat("answer ", 300)
	for _, size := range []int64{int64(len(body)), 10, int64(len(body)) * 3, 0, -1, maxSizedBody + 1} {
		got, err := readAllSized(iotestHalf(strings.NewReader(body)), size)
		if err != nil || string(got) != body {
			t.Errorf("size %d: %d bytes, %v; want the %d-byte body", size, len(got), err, len(body))
		}
	}
	sr := strings.NewReader(body)
	if n := testing.AllocsPerRun(20, func() { sr.Reset(body); _, _ = readAllSized(sr, int64(len(body))) }); n > 1 {
		t.Errorf("%.0f allocations for a body of the announced size, want 1", n)
	}
}

// iotestHalf reads at most half of what is asked (and at least a byte), as
// a socket may.
func iotestHalf(r io.Reader) io.Reader { return halfReader{r} }

type halfReader struct{ r io.Reader }

func (h halfReader) Read(p []byte) (int, error) { return h.r.Read(p[:max(len(p)/2, 1)]) }

// TestStreamNotModified: a 3xx that the HTTP client does not follow (304)
// is no error status to go-openai, so it is read as a stream: an answer
// that never started, retried as stream_cut.
func TestStreamNotModified(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNotModified)
	}))
	defer s.Close()
	c := New(Options{BaseURL: s.URL + "/v1"})
	_, err := c.Complete(context.Background(), userReq(true), nil)
	asError(t, err, CauseStreamCut, true)
}

// TestIdleBodyCountsBytes: the watch measures silence from the last byte,
// whatever the byte (a keep-alive comment is one), on its own clock.
func TestIdleBodyCountsBytes(t *testing.T) {
	var aborted atomic.Int64
	const limit = 100 * time.Millisecond
	// The real timer is set far off; the test drives check itself.
	b := watchIdle(io.NopCloser(strings.NewReader(strings.Repeat(": ping\n\n", 4))), time.Hour, func() { aborted.Add(1) })
	defer b.Close()
	b.limit = limit
	var clock time.Duration
	b.now = func() time.Duration { return clock }
	buf := make([]byte, 8)
	read := func() {
		if _, err := b.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	clock = 90 * time.Millisecond
	b.check()
	read() // a ping at 90ms
	clock = 180 * time.Millisecond
	b.check() // 90ms since the ping
	read()
	clock = 270 * time.Millisecond
	b.check()
	if n := aborted.Load(); n != 0 {
		t.Fatalf("aborted %d times while pings kept coming", n)
	}
	clock = 280 * time.Millisecond // 100ms of silence since the last ping
	b.check()
	if n := aborted.Load(); n != 1 {
		t.Fatalf("aborted %d times after %v of silence, want once", n, limit)
	}
}

// TestIdleBodyRearmsForWhatIsLeft: after a byte at 100 ms of a 200 ms
// bound, the watch that fires at 200 ms waits the 100 ms left, so that
// silence ends the stream near 300 ms, not a whole bound later.
func TestIdleBodyRearmsForWhatIsLeft(t *testing.T) {
	b := watchIdle(io.NopCloser(strings.NewReader("x")), time.Hour, func() {})
	defer b.Close()
	b.limit = 200 * time.Millisecond
	var clock time.Duration
	b.now = func() time.Duration { return clock }
	var armed []time.Duration
	b.rearm = func(d time.Duration) { armed = append(armed, d) }
	clock = 100 * time.Millisecond
	if _, err := b.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	clock = 200 * time.Millisecond // the timer set at the start fires
	b.check()
	if len(armed) != 1 || armed[0] != 100*time.Millisecond {
		t.Fatalf("re-armed for %v, want [100ms]: the time left since the byte at 100ms", armed)
	}
}
