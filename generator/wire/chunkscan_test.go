package wire

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/wire/codec"
)

// chunkSeeds is every streamed chunk and body in testdata, the chunk shape
// BenchmarkStream sends, and the edge cases of chunkEdgeCases.
func chunkSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	sse, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(sse) == 0 {
		t.Fatalf("no testdata/*.sse: %v", err)
	}
	for _, p := range sse {
		seeds = append(seeds, sseChunks(t, filepath.Base(p))...)
	}
	bodies, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range bodies {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	seeds = append(seeds, []byte(benchChunk))
	for _, c := range chunkEdgeCases {
		seeds = append(seeds, []byte(c.in))
	}
	return seeds
}

// benchChunk is a reasoning chunk as vLLM streams it with usage reporting on.
const benchChunk = `{"id":"chatcmpl-9c1d5e0f2a7b4c3d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning":" token"},"logprobs":null,"finish_reason":null,"token_ids":null}],"usage":null}`

// chunkEdgeCases are inputs where a hand-written scanner is easy to get
// wrong. fast says whether scanChunk must answer itself (true) or hand the
// chunk to the reference (false): a fast path that silently always fell
// back would pass the differential test and be useless.
var chunkEdgeCases = []struct {
	name string
	in   string
	fast bool
}{
	{"key order reversed, whitespace", " \r\n\t{ \"usage\" : { \"completion_tokens\" : 7 , \"prompt_tokens\" : 3 } ,\n\"choices\":[ { \"finish_reason\" : \"length\" , \"delta\" : { \"content\" : \"c\" , \"reasoning\" : \"r\" } , \"index\" : 0 } ] , \"model\" : \"m\" } \n", true},
	{"empty object", `{}`, true},
	{"everything null", `{"model":null,"object":null,"error":null,"message":null,"choices":[{"index":null,"delta":{"content":null,"reasoning":null,"reasoning_content":null},"finish_reason":null}],"usage":null}`, true},
	{"choices null", `{"model":"m","choices":null}`, true},
	{"delta null", `{"choices":[{"index":0,"delta":null,"finish_reason":"stop"}]}`, true},
	// usage.prompt_tokens_details (OpenAI's, vLLM's with
	// --enable-prompt-tokens-details) read on the fast path: cached_tokens,
	// its other keys skipped; what the reference would merge or fold is its.
	{"cached tokens", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":32,"audio_tokens":0}}}`, true},
	{"cached tokens details null", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":5,"prompt_tokens_details":null}}`, true},
	{"cached tokens null", `{"choices":[],"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":null}}}`, true},
	{"cached tokens beside completion details", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":3},"prompt_tokens_details":{"cached_tokens":8}}}`, true},
	{"cached tokens twice", `{"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}`, false},
	{"cached tokens folded", `{"usage":{"prompt_tokens_details":{"Cached_Tokens":3}}}`, false},
	{"prompt tokens details twice", `{"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{"audio_tokens":2}}}`, false},
	{"cached tokens a fraction", `{"usage":{"prompt_tokens_details":{"cached_tokens":1.5}}}`, false},
	{"prompt tokens details a list", `{"usage":{"prompt_tokens_details":[1]}}`, false},
	{"null choice entry is index 0", `{"choices":[null,{"index":0,"delta":{"content":"x"}}]}`, true},
	{"usage empty object is known", `{"choices":[],"usage":{}}`, true},
	{"usage with details", `{"usage":{"prompt_tokens":14,"total_tokens":37,"completion_tokens":23,"prompt_tokens_details":{"cached_tokens":0}}}`, true},
	{"negative and zero ints", `{"choices":[{"index":-0}],"usage":{"prompt_tokens":-5,"completion_tokens":0}}`, true},
	{"reasoning empty, reasoning_content set", `{"choices":[{"delta":{"reasoning":"","reasoning_content":"rc"}}]}`, true},
	{"reasoning and reasoning_content differ", `{"choices":[{"delta":{"reasoning_content":"rc","reasoning":"r"}}]}`, true},
	{"several choices, index 0 second", `{"choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"content":"zero"},"finish_reason":"stop"},{"index":0,"delta":{"content":"again"}}]}`, true},
	{"no choice 0", `{"choices":[{"index":2,"delta":{"content":"two"}}]}`, true},
	{"unknown keys hold known names", `{"x":{"content":"no","choices":[{"index":0,"delta":{"content":"no"}}]},"choices":[{"logprobs":{"content":[{"token":"a","logprob":-0.5e-3,"bytes":[97],"top_logprobs":[]}]},"delta":{"function_call":[{"function":{"content":"no"}}],"content":"yes"}}],"y":[true,false,null,1.5E+2,-0,"s\"\\"]}`, true},
	{"tool_calls null", `{"choices":[{"index":0,"delta":{"content":"x","tool_calls":null}}]}`, true},
	{"tool_calls empty", `{"choices":[{"index":0,"delta":{"tool_calls":[ ],"content":"x"}}]}`, true},
	{"tool_calls twice", `{"choices":[{"index":0,"delta":{"tool_calls":[],"tool_calls":[]}}]}`, false},
	{"tool call", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"a"}}]}}]}`, false},
	{"tool call arguments an object", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":{"a":1}}}]}}]}`, false},
	{"tool call index a string", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"0"}]}}]}`, false},
	{"escapes", `{"model":"a\/b","choices":[{"delta":{"content":"q\"b\\s\/b\bf\fn\nr\rt\t\u00e9\u4e2d\ud83d\ude00"}}]}`, true},
	{"lone high surrogate", `{"choices":[{"delta":{"content":"\ud83d x"}}]}`, true},
	{"high surrogate then non-surrogate escape", `{"choices":[{"delta":{"content":"\ud83d\u0041"}}]}`, true},
	{"lone low surrogate", `{"choices":[{"delta":{"content":"\ude00"}}]}`, true},
	{"surrogate at end of string", `{"choices":[{"delta":{"content":"a\ud83d"}}]}`, true},
	{"two high surrogates", `{"choices":[{"delta":{"content":"\ud83d\ud83d\ude00"}}]}`, true},
	{"escaped NUL", `{"choices":[{"delta":{"content":"\u0000"}}]}`, true},
	{"raw UTF-8", `{"model":"modèle","choices":[{"delta":{"reasoning":"思考 😊"}}]}`, true},
	{"invalid UTF-8", "{\"choices\":[{\"delta\":{\"content\":\"a\xffb\xed\xa0\x80c\xe4\xb8\"}}]}", true},
	{"invalid UTF-8 with escapes", "{\"choices\":[{\"delta\":{\"content\":\"\\n\xc3(\"}}]}", true},
	{"long content", `{"choices":[{"delta":{"content":"` + strings.Repeat("long text ", 100) + `"}}]}`, true},
	{"object not error", `{"object":"chat.completion.chunk","error":null}`, true},
	{"token ids", `{"choices":[{"index":0,"delta":{"content":"a"},"token_ids":[0,-1,2147483647,-2147483648,null]}],"prompt_token_ids":[151644,null,7]}`, true},
	{"token ids null and empty", `{"prompt_token_ids":null,"choices":[{"delta":{"token_ids":[]},"token_ids":null}]}`, true},
	{"delta ids when the choice has none", `{"choices":[{"token_ids":[],"delta":{"token_ids":[5,6]}}]}`, true},
	{"choice ids over the delta's", `{"choices":[{"delta":{"token_ids":[5]},"token_ids":[7,8]}]}`, true},
	{"ids of other choices dropped", `{"choices":[{"index":1,"token_ids":[1],"logprobs":{"content":[{"logprob":-1,"top_logprobs":[{"token":"token_id:1","logprob":-1}]}]}},{"token_ids":[2],"index":0},{"index":0,"token_ids":[3]}]}`, true},
	{"logprobs by id", `{"choices":[{"logprobs":{"content":[{"token":"token_id:9","logprob":-0.25,"bytes":[1],"top_logprobs":[{"token":"token_id:9","logprob":-0.25,"bytes":[]},{"logprob":-1e1,"token":"token_id:0"}]},null,{"top_logprobs":null,"logprob":null},{"logprob":-9999.0,"top_logprobs":[]}],"refusal":null},"token_ids":[9,1,2,3]}]}`, true},
	{"logprobs content null", `{"choices":[{"logprobs":{"content":null}}]}`, true},
	{"logprob float32 extremes", `{"choices":[{"logprobs":{"content":[{"logprob":-3.4028234e38,"top_logprobs":[{"token":"token_id:1","logprob":-1.4e-45}]}]}}]}`, true},
	{"bytes of every shape", `{"choices":[{"logprobs":{"content":[{"token":7,"bytes":[0, 1],"top_logprobs":[{"bytes":[-1,2.5,"x",{"a":[]}],"token":"token_id:1"},{"bytes":null,"token":"token_id:2"},{"bytes":[],"token":"token_id:3"},{"bytes":"AQ==","token":"token_id:4"}]},{"bytes":[255,0,10],"token":null}]}}]}`, true},
	{"prompt ids in a plain answer", `{"choices":[{"index":0,"message":{"content":"x","token_ids":[3]},"finish_reason":"stop"}],"prompt_token_ids":[1,2]}`, true},

	{"bytes with a leading zero", `{"choices":[{"logprobs":{"content":[{"bytes":[01]}]}}]}`, false},
	{"bytes cut", `{"choices":[{"logprobs":{"content":[{"bytes":[1,`, false},
	{"alternative named by text", `{"choices":[{"logprobs":{"content":[{"logprob":-1,"top_logprobs":[{"token":"token_id:1","logprob":-1},{"token":" the","logprob":-2}]}]}}]}`, false},
	{"alternative with an escape", `{"choices":[{"logprobs":{"content":[{"logprob":-1,"top_logprobs":[{"token":"token_id:\u0031","logprob":-1}]}]}}]}`, false},
	{"alternative without token", `{"choices":[{"logprobs":{"content":[{"logprob":-1,"top_logprobs":[{"logprob":-1}]}]}}]}`, false},
	{"alternative null", `{"choices":[{"logprobs":{"content":[{"logprob":-1,"top_logprobs":[null]}]}}]}`, false},
	{"token id with leading zero", `{"choices":[{"logprobs":{"content":[{"top_logprobs":[{"token":"token_id:01"}]}]}}]}`, false},
	{"token id past int32", `{"choices":[{"logprobs":{"content":[{"top_logprobs":[{"token":"token_id:2147483648"}]}]}}]}`, false},
	{"logprob past float32", `{"choices":[{"logprobs":{"content":[{"logprob":-1e39}]}}]}`, false},
	{"logprob as string", `{"choices":[{"logprobs":{"content":[{"logprob":"-1"}]}}]}`, false},
	{"id as float", `{"choices":[{"token_ids":[1.0]}]}`, false},
	{"id with exponent", `{"prompt_token_ids":[1e2]}`, false},
	{"id past int32", `{"choices":[{"token_ids":[2147483648]}]}`, false},
	{"ids as object", `{"choices":[{"token_ids":{"0":1}}]}`, false},
	{"duplicate token_ids", `{"choices":[{"token_ids":[1],"token_ids":[2]}]}`, false},
	{"duplicate prompt_token_ids", `{"prompt_token_ids":[1],"prompt_token_ids":[2]}`, false},
	{"duplicate logprobs content", `{"choices":[{"logprobs":{"content":[],"content":null}}]}`, false},
	{"duplicate top_logprobs", `{"choices":[{"logprobs":{"content":[{"top_logprobs":[],"top_logprobs":[]}]}}]}`, false},
	{"token_ids case-folds", `{"choices":[{"Token_IDs":[1]}]}`, false},
	{"logprob case-folds", `{"choices":[{"logprobs":{"content":[{"LogProb":-1}]}}]}`, false},

	{"key case-folds", `{"choices":[{"delta":{"Content":"x"}}]}`, false},
	{"key folds by Unicode (long s)", `{"choices":[{"delta":{"reaſoning":"x"}}]}`, false},
	{"key upper case", `{"MODEL":"m"}`, false},
	{"key folds by Unicode (Kelvin sign)", "{\"usage\":{\"prompt_to\u212aens\":5}}", false},
	{"escaped key", `{"\u006dodel":"m"}`, false},
	{"duplicate model, last wins", `{"model":"a","model":"b"}`, false},
	{"duplicate delta merges", `{"choices":[{"delta":{"content":"a"},"delta":{"reasoning":"b"}}]}`, false},
	{"duplicate usage then null", `{"usage":{"prompt_tokens":1},"usage":null}`, false},
	{"duplicate content", `{"choices":[{"delta":{"content":"a","content":"b"}}]}`, false},
	{"error event", `{"error": {"object": "error", "message": "too long", "type": "BadRequestError", "param": null, "code": 400}}`, false},
	{"flat error", `{"object":"error","message":"bad","code":400}`, false},
	{"escaped object error", `{"object":"err\u006fr","message":"bad"}`, false},
	{"error false", `{"error":false,"choices":[]}`, false},
	{"float in int", `{"usage":{"prompt_tokens":1.0}}`, false},
	{"exponent in int", `{"usage":{"prompt_tokens":1e3}}`, false},
	{"int overflow", `{"usage":{"completion_tokens":9223372036854775808}}`, false},
	{"19 digits", `{"usage":{"completion_tokens":1000000000000000000}}`, false},
	{"leading zero", `{"choices":[{"index":01}]}`, false},
	{"index as string", `{"choices":[{"index":"0"}]}`, false},
	{"model as number", `{"model":1}`, false},
	{"content as array", `{"choices":[{"delta":{"content":["a"]}}]}`, false},
	{"choices as object", `{"choices":{"index":0}}`, false},
	{"usage as number", `{"usage":0}`, false},
	{"top-level null", `null`, false},
	{"top-level array", `[]`, false},
	{"empty input", ``, false},
	{"byte order mark", "\ufeff{}", false},
	{"trailing garbage", `{}x`, false},
	{"two objects", `{}{}`, false},
	{"trailing comma", `{"model":"m",}`, false},
	{"missing colon", `{"model" "m"}`, false},
	{"single-quote escape", `{"x":"\'"}`, false},
	{"bad unicode escape", `{"x":"\u12G4"}`, false},
	{"control char", "{\"x\":\"a\tb\"}", false},
	{"unterminated string", `{"model":"m`, false},
	{"bad literal", `{"x":nul}`, false},
	{"bad number", `{"x":-}`, false},
	{"bad fraction", `{"x":1.}`, false},
	{"bad exponent", `{"x":1e}`, false},
	{"deep nesting", `{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, false},
	{"mismatched brackets", `{"x":[}`, false},
}

// sameDecode fails t unless decodeChunk and the reference agree on data,
// and neither fast path (scanChunk, and fastChunk, the fastjson variant
// BenchmarkStreamDecoder measures) answers otherwise.
func sameDecode(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := decodeChunk(data)
	want, werr := decodeChunkReference(data)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("input %q: error %v, reference %v", data, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input %q:\n got %+v\nwant %+v", data, got, want)
	}
	if d, ok := scanChunk(data); ok && (werr != nil || !reflect.DeepEqual(d, want)) {
		t.Fatalf("input %q: fast path answered %+v, reference %+v, %v", data, d, want, werr)
	}
	if d, ok := fastChunk(data); ok && (werr != nil || !reflect.DeepEqual(d, want)) {
		t.Fatalf("input %q: fastjson path answered %+v, reference %+v, %v", data, d, want, werr)
	}
}

func TestChunkScanEdgeCases(t *testing.T) {
	for _, c := range chunkEdgeCases {
		t.Run(c.name, func(t *testing.T) {
			sameDecode(t, []byte(c.in))
			if _, ok := scanChunk([]byte(c.in)); ok != c.fast {
				t.Errorf("fast path taken: %v, want %v", ok, c.fast)
			}
		})
	}
}

// TestChunkScanTestdata: every chunk of the recorded streams decodes the
// same, and the fast path answers every one that is not an error event,
// nor logprobs naming alternatives by text (the reference's: a server that
// ignores return_tokens_as_token_ids), nor a piece of a tool call.
func TestChunkScanTestdata(t *testing.T) {
	sse, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, p := range sse {
		t.Run(filepath.Base(p), func(t *testing.T) {
			byText := strings.HasSuffix(p, "_logprobs_text.sse")
			for i, c := range sseChunks(t, filepath.Base(p)) {
				sameDecode(t, c)
				_, ok := scanChunk(c)
				slow := bytes.Contains(c, []byte(`"error"`)) || byText && bytes.Contains(c, []byte(`"top_logprobs":[{`)) ||
					bytes.Contains(c, []byte(`"tool_calls":[{`))
				if ok == slow {
					t.Errorf("chunk %d: fast path %v for %q", i, ok, c)
				}
			}
		})
	}
}

// TestChunkScanValues pins a few decoded values directly, so that a bug
// shared by both decoders (a wrong struct tag, pickReasoning) still shows.
func TestChunkScanValues(t *testing.T) {
	tests := []struct {
		in   string
		want codec.Delta
	}{
		{benchChunk, codec.Delta{Model: "Qwen/Qwen3-8B", Reasoning: " token"}},
		{`{"choices":[{"delta":{"content":"\ud83d\ude00 \ud83d"}}]}`, codec.Delta{Content: "😀 \uFFFD"}},
		{"{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}", codec.Delta{Content: "a\uFFFDb"}},
		{`{"choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"reasoning":"","reasoning_content":"zero"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			codec.Delta{Reasoning: "zero", FinishReason: "length", PromptTokens: 3, CompletionTokens: 4, UsageKnown: true}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got, ok := scanChunk([]byte(tt.in))
			if !ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("scanChunk(%q) = %+v, %v; want %+v", tt.in, got, ok, tt.want)
			}
		})
	}
}

// TestChunkScanAllocs: the point of the fast path is at most one
// allocation per chunk (the text), none for a chunk without text, and none
// for a chunk of a stream.
func TestChunkScanAllocs(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  float64
		name string
	}{
		{benchChunk, 1, "text"},
		{`{"id":"x","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":23}}`, 0, "usage only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.in)
			if n := testing.AllocsPerRun(100, func() { _, _ = decodeChunk(data) }); n > c.max {
				t.Errorf("%.0f allocations per chunk, want at most %.0f", n, c.max)
			}
			// A stream's chunks share one TokenBuf: its text scratch is
			// reused, so a chunk after the first allocates nothing.
			var tb codec.TokenBuf
			if n := testing.AllocsPerRun(100, func() { _, _ = decodeChunkInto(data, &tb) }); n > 0 {
				t.Errorf("%.0f allocations per chunk of a stream, want 0", n)
			}
		})
	}
}

// FuzzChunkScanMatchesReference: for any bytes, decodeChunk (fast path or
// fallback) returns exactly what the encoding/json reference returns, the
// same value or an error with the same text, and the fast path never
// answers an input the reference refuses.
func FuzzChunkScanMatchesReference(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecode(t, data)
	})
}

// FuzzHeadResume: a stream's scan that resumes after the head it kept from
// the chunk before (codec's head) returns exactly what a fresh scan of the
// chunk returns. The second chunk is the first's first k bytes and any
// tail, so it shares a head with the first as often as not.
func FuzzHeadResume(f *testing.F) {
	seeds := chunkSeeds(f)
	for i, s := range seeds {
		next := seeds[(i+1)%len(seeds)]
		f.Add(s, uint16(bytes.Index(s, []byte(`"choices":`))+10), next[min(len(next), 120):])
	}
	f.Fuzz(func(t *testing.T, first []byte, k uint16, tail []byte) {
		second := append(first[:min(int(k), len(first)):min(int(k), len(first))], tail...)
		tb := codec.TokenBuf{Stream: true}
		codec.Scan(first, codec.ChunkShape, &tb)
		got, gotPicked, gotOK := codec.Scan(second, codec.ChunkShape, &tb)
		want, wantPicked, wantOK := codec.Scan(second, codec.ChunkShape, &codec.TokenBuf{})
		if gotOK != wantOK || gotPicked != wantPicked || !reflect.DeepEqual(got, want) {
			t.Fatalf("after %q, %q:\nresumed %+v %v %v\n  fresh %+v %v %v", first, second, got, gotPicked, gotOK, want, wantPicked, wantOK)
		}
	})
}

// FuzzTextResume: a stream's scan that reads a chunk as its text template
// with another string (codec's textTemplate) returns exactly what a fresh
// scan returns. The second chunk is the first with bytes k to j replaced
// by mid: the first's text string, when k and j fall at its two ends and
// mid is a string's contents, which the seeds give and the fuzzer moves.
// The two are scanned in turn twice, each time compared with a fresh scan.
func FuzzTextResume(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		for _, key := range []string{`"content":"`, `"reasoning":"`, `"reasoning_content":"`} {
			if k := bytes.Index(s, []byte(key)); k >= 0 {
				k += len(key)
				j := k + bytes.IndexByte(s[k:], '"')
				f.Add(s, uint16(k), uint16(j), []byte(` other \"text\" \u00e9`))
			}
		}
	}
	f.Fuzz(func(t *testing.T, first []byte, k, j uint16, mid []byte) {
		lo := min(int(k), len(first))
		hi := min(max(int(j), lo), len(first))
		second := append(append(append([]byte{}, first[:lo]...), mid...), first[hi:]...)
		tb := codec.TokenBuf{Stream: true}
		for _, chunk := range [][]byte{first, second, first, second} {
			got, gotPicked, gotOK := codec.Scan(chunk, codec.ChunkShape, &tb)
			want, wantPicked, wantOK := codec.Scan(chunk, codec.ChunkShape, &codec.TokenBuf{})
			if gotOK != wantOK || gotPicked != wantPicked || !reflect.DeepEqual(got, want) {
				t.Fatalf("in a stream of %q and %q, %q:\nresumed %+v %v %v\n  fresh %+v %v %v", first, second, chunk, got, gotPicked, gotOK, want, wantPicked, wantOK)
			}
		}
	})
}

// BenchmarkDecodeChunkReference is BenchmarkDecodeChunk's chunk through
// encoding/json, for the ratio within one run.
func BenchmarkDecodeChunkReference(b *testing.B) {
	chunk := sseChunks(b, "stream_reasoning_usage.sse")[5]
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeChunkReference(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

// asMessage turns a chunk into the plain answer of the same content: the
// choice's delta becomes its message.
func asMessage(chunk []byte) []byte {
	return bytes.ReplaceAll(chunk, []byte(`"delta"`), []byte(`"message"`))
}

// sameResponse fails t unless decodeResponse (scanAnswer's fast path or
// the fallback) and decodeResponseReference agree on body: the same answer,
// or errors with the same text and cause.
func sameResponse(t *testing.T, body []byte) {
	t.Helper()
	got, gerr := decodeResponse(body)
	want, werr := decodeResponseReference(body)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("body %q: error %v, reference %v", body, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\n got %+v\nwant %+v", body, got, want)
	}
}

// TestResponseScan: the plain answers in testdata and every chunk edge
// case in its plain shape decode as the reference decodes them, and the
// fast path answers the real answers itself.
func TestResponseScan(t *testing.T) {
	for _, c := range chunkEdgeCases {
		sameResponse(t, asMessage([]byte(c.in)))
		sameResponse(t, []byte(c.in)) // a delta in a plain answer is an unknown key
	}
	plain, _ := filepath.Glob(filepath.Join("testdata", "plain_*.json"))
	if len(plain) == 0 {
		t.Fatal("no testdata/plain_*.json")
	}
	for _, p := range plain {
		body := testdata(t, filepath.Base(p))
		sameResponse(t, body)
		if strings.Contains(p, "_tool_calls") {
			continue // a call is the reference's to read (toolcalls.go)
		}
		if _, picked, ok := codec.Scan(body, codec.MessageShape, &codec.TokenBuf{}); !ok || !picked {
			t.Errorf("%s: the fast path did not answer (ok %v, choice 0 %v)", p, ok, picked)
		}
	}
}

// FuzzResponseScanMatchesReference: for any bytes, decodeResponse returns
// exactly what the encoding/json reference returns.
func FuzzResponseScanMatchesReference(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		f.Add(asMessage(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameResponse(t, body)
	})
}

// scanChunk is the scanner's reading of a chunk alone, without the
// reference behind it.
func scanChunk(data []byte) (codec.Delta, bool) {
	d, _, ok := codec.Scan(data, codec.ChunkShape, &codec.TokenBuf{})
	return d, ok
}
