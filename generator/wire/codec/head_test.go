package codec

import (
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/jsonlex"
)

// TestHeadResumes: a stream's chunks after the first are read from after
// their head, and read as a fresh scan reads them; a chunk whose head
// differs (the usage chunk's, another id's) is read whole, and one whose
// head held token ids is never resumed after (those live in the buffer).
func TestHeadResumes(t *testing.T) {
	const head = `{"id":"chatcmpl-9c1d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":`
	chunk := func(h, text string) string {
		return h + `[{"index":0,"delta":{"content":"` + text + `"},"logprobs":null,"finish_reason":null}]}`
	}
	stream := []struct {
		chunk   string
		resumes bool
	}{
		{chunk(head, "a"), false}, // nothing kept yet
		{chunk(head, "b"), true},
		{chunk(head, `c\"`), true},
		{chunk(strings.Replace(head, "9c1d", "9c1e", 1), "d"), false}, // another head
		{chunk(strings.Replace(head, "9c1d", "9c1e", 1), "e"), true},
		{`{"id":"x","prompt_token_ids":[1,2],"choices":[{"index":0,"delta":{"content":"f"}}]}`, false},
		{`{"id":"x","prompt_token_ids":[1,2],"choices":[{"index":0,"delta":{"content":"g"}}]}`, false}, // ids in the head: not kept
		{chunk(head, "h"), false},
		{head + `[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, true},
	}
	tb := TokenBuf{Stream: true}
	for i, c := range stream {
		resumed, _ := scanInStream(t, i, c.chunk, &tb)
		if resumed != c.resumes {
			t.Errorf("chunk %d %s: resumed %v, want %v", i, c.chunk, resumed, c.resumes)
		}
	}
}

// scanInStream scans chunk i of a stream with the stream's buffer, fails t
// unless it reads as a fresh scan does, and says how the buffer was used:
// resumed after the head, whole from the text template.
func scanInStream(t *testing.T, i int, chunk string, tb *TokenBuf) (resumed, whole bool) {
	t.Helper()
	s := chunkScanner{Cursor: jsonlex.Cursor{B: []byte(chunk)}, shape: ChunkShape, tb: tb}
	var f answerFields
	var seen uint8
	resumed, whole = s.resume(&f, &seen)
	got, gotPicked, gotOK := Scan([]byte(chunk), ChunkShape, tb)
	want, wantPicked, wantOK := Scan([]byte(chunk), ChunkShape, &TokenBuf{})
	if !gotOK || gotOK != wantOK || gotPicked != wantPicked || !reflect.DeepEqual(got, want) {
		t.Errorf("chunk %d: resumed %+v %v %v, fresh %+v %v %v", i, got, gotPicked, gotOK, want, wantPicked, wantOK)
	}
	return resumed, whole
}

// TestTextResumes: a chunk that is the last one read whole with another
// text string is read from its template, and read as a fresh scan reads
// it; a chunk of another shape (reasoning after content, the finish, the
// usage) is read whole, and becomes the template when it can be one.
func TestTextResumes(t *testing.T) {
	const head = `{"id":"chatcmpl-9c1d","object":"chat.completion.chunk","created":1767593900,"model":"Qwen/Qwen3-8B","choices":`
	chunk := func(key, text, finish string) string {
		return head + `[{"index":0,"delta":{"` + key + `":"` + text + `"},"logprobs":null,"finish_reason":` + finish + `}]}`
	}
	stream := []struct {
		chunk   string
		resumes bool
	}{
		{chunk("reasoning", "a", "null"), false}, // nothing kept yet
		{chunk("reasoning", "bc", "null"), true},
		{chunk("reasoning", `\"d\u00e9`, "null"), true},
		{chunk("reasoning", "", "null"), true},
		{chunk("content", "e", "null"), false}, // another key
		{chunk("content", "f\xc3\xa9", "null"), true},
		{chunk("content", "g", `"stop"`), false},
		{chunk("content", "h", `"stop"`), false}, // a finish after the text is never a template
		{chunk("content", "i", "null"), false},
		{head + `[{"index":0,"delta":{"content":"j","reasoning":"k"}}]}`, false},
		{head + `[{"index":0,"delta":{"content":"l","reasoning":"m"}}]}`, false}, // two strings: which one moved?
		{head + `[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, false},
	}
	tb := TokenBuf{Stream: true}
	for i, c := range stream {
		if _, whole := scanInStream(t, i, c.chunk, &tb); whole != c.resumes {
			t.Errorf("chunk %d %s: read from the text template %v, want %v", i, c.chunk, whole, c.resumes)
		}
	}
}
