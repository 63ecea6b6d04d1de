package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// The answers of testdata/*token_ids_logprobs*: what the server tokenized
// and generated, and each token's logprob with its three alternatives.
var (
	wantPromptIDs = []int32{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198}
	wantIDs       = []int32{32313, 11, 4135, 624, 271, 17, 488, 220, 284, 220, 151645}
)

// wantLogprobs is the record's logprobs of those answers: by id, or (text)
// by the alternatives' text.
func wantLogprobs(text bool) *Logprobs {
	l := &Logprobs{}
	texts := []string{"Okay", ",", " easy", ".\n", "\n\n", "2", " +", " 2", " =", " 4"}
	others := []string{" the", "\n", "é"}
	for i, id := range wantIDs[:10] {
		lp := float32(-0.0125 * float64(i+1))
		l.TokenLogprobs = append(l.TokenLogprobs, lp)
		l.TopLogprobs = append(l.TopLogprobs, []float32{lp, float32(-3.5 - float64(i)*0.25), -7})
		if text {
			l.TopTokens = append(l.TopTokens, []string{texts[i], others[(i+1)%3], others[(i+2)%3]})
		} else {
			l.TopIDs = append(l.TopIDs, []int32{id, id + 7, int32(100 + i)})
		}
	}
	l.TokenLogprobs = append(l.TokenLogprobs, -0.0001)
	l.TopLogprobs = append(l.TopLogprobs, []float32{-0.0001})
	if text {
		l.TopTokens = append(l.TopTokens, []string{""})
	} else {
		l.TopIDs = append(l.TopIDs, []int32{151645})
	}
	return l
}

func tokenReq(stream bool) Request {
	r := userReq(stream)
	r.ReturnTokenIDs, r.Logprobs = true, 3
	return r
}

// TestTokensFromAnswers: a stream's prompt ids (its first chunk), answer
// ids (its chunks' concatenated, the end-of-sequence token's included) and
// logprobs, and a plain answer's, come out as the server sent them; with
// usage agreeing, nothing is said to mismatch.
func TestTokensFromAnswers(t *testing.T) {
	for _, tt := range []struct {
		file   string
		stream bool
		text   bool
	}{
		{"stream_token_ids_logprobs.sse", true, false},
		{"stream_token_ids_logprobs_text.sse", true, true},
		{"plain_token_ids_logprobs.json", false, false},
	} {
		t.Run(tt.file, func(t *testing.T) {
			s := httptest.NewServer(replay(t, tt.file))
			defer s.Close()
			got, err := New(Options{BaseURL: s.URL}).Complete(context.Background(), tokenReq(tt.stream), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.PromptTokenIDs, wantPromptIDs) || !slices.Equal(got.TokenIDs, wantIDs) {
				t.Errorf("ids %v / %v, want %v / %v", got.PromptTokenIDs, got.TokenIDs, wantPromptIDs, wantIDs)
			}
			if want := wantLogprobs(tt.text); !reflect.DeepEqual(got.Logprobs, want) {
				t.Errorf("logprobs\n got %+v\nwant %+v", got.Logprobs, want)
			}
			if got.TokenIDsMismatch != "" {
				t.Errorf("mismatch %q for an answer whose counts agree", got.TokenIDsMismatch)
			}
			if got.Content != "\n\n2 + 2 = 4" || got.Reasoning != "Okay, easy.\n" {
				t.Errorf("text %q / %q", got.Reasoning, got.Content)
			}
		})
	}
}

// tokenChunk is one streamed token as vLLM sends it with ids and logprobs;
// alt names the alternatives (by id, or some text).
func tokenChunk(id int, alt func(k int) string) string {
	var alts []string
	for k := range 3 {
		alts = append(alts, fmt.Sprintf(`{"token":%q,"logprob":-%d.5,"bytes":[1]}`, alt(k), k))
	}
	return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"content":"t"},"logprobs":{"content":[{"token":"x","logprob":-0.5,"top_logprobs":[%s]}]},"finish_reason":null,"token_ids":[%d]}]}`+"\n\n",
		strings.Join(alts, ","), id)
}

func streamOf(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			_, _ = io.WriteString(w, c)
		}
	}
}

const (
	finishChunk = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	doneChunk   = "data: [DONE]\n\n"
)

func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\n", prompt, completion)
}

// TestTokensMismatchSaid: counts that disagree with usage, or logprobs not
// one a token, are said in TokenIDsMismatch; an answer asked for ids that
// carries none (a server ignoring the flag) says so where usage came.
func TestTokensMismatchSaid(t *testing.T) {
	byID := func(k int) string { return fmt.Sprintf("token_id:%d", k) }
	for _, tt := range []struct {
		name   string
		chunks []string
		asked  bool
		want   string
	}{
		{"one fewer id than usage", []string{tokenChunk(5, byID), tokenChunk(6, byID), finishChunk, usageChunk(0, 3)}, true,
			"2 token_ids, usage.completion_tokens 3"},
		{"prompt ids short", []string{`data: {"prompt_token_ids":[1],"choices":[]}` + "\n\n", tokenChunk(5, byID), finishChunk, usageChunk(2, 1)}, true,
			"1 prompt_token_ids, usage.prompt_tokens 2"},
		{"logprobs for fewer tokens", []string{tokenChunk(5, byID), `data: {"choices":[{"delta":{"content":"u"},"token_ids":[7]}]}` + "\n\n", finishChunk}, true,
			"1 logprobs for 2 token_ids"},
		{"no ids from a server that ignores the flag", []string{`data: {"choices":[{"delta":{"content":"u"}}]}` + "\n\n", finishChunk, usageChunk(4, 1)}, true,
			"0 token_ids, usage.completion_tokens 1; 0 prompt_token_ids, usage.prompt_tokens 4"},
		{"none asked, none came", []string{`data: {"choices":[{"delta":{"content":"u"}}]}` + "\n\n", finishChunk, usageChunk(4, 1)}, false, ""},
		{"no usage: nothing to check", []string{tokenChunk(5, byID), finishChunk}, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := httptest.NewServer(streamOf(append(tt.chunks, doneChunk)...))
			defer s.Close()
			req := tokenReq(true)
			req.ReturnTokenIDs = tt.asked
			got, err := New(Options{BaseURL: s.URL}).Complete(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.TokenIDsMismatch != tt.want {
				t.Errorf("mismatch %q, want %q", got.TokenIDsMismatch, tt.want)
			}
		})
	}
}

// TestTokensByTextMidStream: alternatives that come by id and then by text
// are all kept as text, the ids as vLLM names them.
func TestTokensByTextMidStream(t *testing.T) {
	s := httptest.NewServer(streamOf(
		tokenChunk(5, func(k int) string { return fmt.Sprintf("token_id:%d", 10+k) }),
		tokenChunk(6, func(k int) string { return []string{" a", "token_id:3", "\n"}[k] }),
		finishChunk, doneChunk))
	defer s.Close()
	got, err := New(Options{BaseURL: s.URL}).Complete(context.Background(), tokenReq(true), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"token_id:10", "token_id:11", "token_id:12"}, {" a", "token_id:3", "\n"}}
	if got.Logprobs == nil || !reflect.DeepEqual(got.Logprobs.TopTokens, want) || got.Logprobs.TopIDs != nil {
		t.Fatalf("logprobs %+v, want alternatives %q as text", got.Logprobs, want)
	}
	if !reflect.DeepEqual(got.Logprobs.TopLogprobs, [][]float32{{-0.5, -1.5, -2.5}, {-0.5, -1.5, -2.5}}) {
		t.Errorf("alternatives' logprobs %v", got.Logprobs.TopLogprobs)
	}
}

// TestTokensBounded: a stream that sends more ids than max_tokens allows,
// without finishing, is cut (overlong), as one that sends too much text.
func TestTokensBounded(t *testing.T) {
	var ids []string
	for i := range 200 {
		ids = append(ids, fmt.Sprint(i))
	}
	chunk := `data: {"choices":[{"delta":{"content":""},"token_ids":[` + strings.Join(ids, ",") + `]}]}` + "\n\n"
	s := httptest.NewServer(streamOf(chunk, finishChunk, doneChunk))
	defer s.Close()
	req := tokenReq(true)
	req.MaxTokens = 100 // 164 ids at most, with the bound's slack
	_, err := New(Options{BaseURL: s.URL}).Complete(context.Background(), req, nil)
	asError(t, err, CauseOverlong, true)
}

// TestEncodeRequestTokens: the body asks for ids and K logprobs named by
// id, after stream_options; a row's own field replaces the job's.
func TestEncodeRequestTokens(t *testing.T) {
	req := tokenReq(true)
	req.Logprobs = 20
	body, err := EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true,"logprobs":true,"top_logprobs":20,"return_tokens_as_token_ids":true}`
	if !strings.HasSuffix(string(body), want) {
		t.Errorf("body %s\nwant it to end %s", body, want)
	}
	req.Params = map[string]any{"top_logprobs": json.Number("2")}
	body, err = EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"return_tokens_as_token_ids":true,"top_logprobs":2}`) || strings.Contains(string(body), `"top_logprobs":20`) {
		t.Errorf("a row's top_logprobs: body %s", body)
	}
	req = userReq(false)
	body, _ = EncodeRequest(req)
	for _, k := range []string{"return_token_ids", "logprobs", "top_logprobs", "return_tokens_as_token_ids"} {
		if strings.Contains(string(body), `"`+k+`"`) {
			t.Errorf("a job without tokens sends %s: %s", k, body)
		}
	}
}

// vllmTokenChunk is a streamed chunk as vLLM sends it with return_token_ids
// and 20 logprobs named by id: the shape the fast path must keep fast.
func vllmTokenChunk(id, k int) string {
	var alts []string
	for a := range k {
		alts = append(alts, fmt.Sprintf(`{"token":"token_id:%d","logprob":%s,"bytes":[32,116,104,101]}`, id+a*13, vllmLogprob(a)))
	}
	return fmt.Sprintf(`{"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning":" token"},"logprobs":{"content":[{"token":"token_id:%d","logprob":-0.0123,"bytes":[32,116,104,101],"top_logprobs":[%s]}]},"finish_reason":null,"token_ids":[%d]}]}`,
		id, strings.Join(alts, ","), id)
}

// vllmLogprob is alternative a's logprob as vLLM writes it: a float32
// widened to a Python float, 17 digits or so.
func vllmLogprob(a int) string {
	return strconv.FormatFloat(float64(-float32(a)-float32(1234+a)/10000), 'g', -1, 64)
}

// TestTokenChunkAllocs: a chunk with ids and 20 logprobs takes the fast
// path and allocates nothing, its tokens and text going into the stream's
// reused buffer.
func TestTokenChunkAllocs(t *testing.T) {
	data := []byte(vllmTokenChunk(4096, 20))
	var tb codec.TokenBuf
	if _, _, ok := codec.Scan(data, codec.ChunkShape, &tb); !ok {
		t.Fatal("the fast path refused a vLLM chunk with ids and logprobs")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeChunkInto(data, &tb) }); n > 0 {
		t.Errorf("%.0f allocations per chunk, want 0", n)
	}
	d, _ := decodeChunkInto(data, &tb)
	if len(d.TokenIDs) != 1 || len(d.Logprobs.TopIDs) != 20 || d.Logprobs.TopIDs[1] != 4096+13 || d.Logprobs.TopLogprob[2] != -2-float32(1236)/10000 {
		t.Errorf("decoded %+v", d)
	}
}

// tokenStreamPayload is benchStreamPayload's stream with return_token_ids
// (the prompt's ids in the first chunk, one id a chunk) and, for k > 0, k
// logprobs named by id on each token, as vLLM streams them.
func tokenStreamPayload(chunks, k int) string {
	var sb strings.Builder
	prompt := make([]string, 256)
	for i := range prompt {
		prompt[i] = fmt.Sprint(151000 + i)
	}
	fmt.Fprintf(&sb, `data: {"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}],"prompt_token_ids":[%s]}`+"\n\n", strings.Join(prompt, ","))
	for i := range chunks {
		c := vllmTokenChunk(1000+i, k)
		if k == 0 {
			c = strings.Replace(c, `"logprobs":{"content":[{"token":"token_id:`+fmt.Sprint(1000+i)+`","logprob":-0.0123,"bytes":[32,116,104,101],"top_logprobs":[]}]}`, `"logprobs":null`, 1)
		}
		sb.WriteString("data: " + c + "\n\n")
	}
	sb.WriteString(`data: {"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","token_ids":[]}],"usage":null}` + "\n\n")
	fmt.Fprintf(&sb, `data: {"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":256,"total_tokens":%d,"completion_tokens":%d}}`+"\n\ndata: [DONE]\n\n", 256+chunks, chunks)
	return sb.String()
}

// TestLongFirstChunkNotKept: the buffer a long line (a long prompt's ids
// in the first chunk) was assembled in is let go once the next line is
// read, rather than held for the rest of the stream.
func TestLongFirstChunkNotKept(t *testing.T) {
	long := `data: {"prompt_token_ids":[` + strings.Repeat("151643,", 40_000) + `1],"choices":[]}` + "\n\n"
	r := newSSEReader(strings.NewReader(long + "data: {}\n\ndata: [DONE]\n\n"))
	defer r.release()
	p, err := r.next()
	if err != nil || len(p) < 280_000 {
		t.Fatalf("first event: %d bytes, %v", len(p), err)
	}
	if _, err := r.next(); err != nil {
		t.Fatal(err)
	}
	if cap(r.line) > maxKeptLine {
		t.Errorf("the stream keeps a %d-byte line buffer after its long line", cap(r.line))
	}
}
