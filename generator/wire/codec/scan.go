package codec

import (
	"bytes"
	"reflect"
	"strings"
	"unsafe"

	"github.com/synthgen/synthgen/internal/jsonlex"
)

// This file is decodeChunk's fast path. A long answer is thousands of
// chunks, and encoding/json's reflection made decoding them most of the
// cost of a stream (docs/performance.md). scanChunk walks the chunk
// once, by hand, and extracts what decodeChunk returns; it allocates one
// string for all the text of a chunk.
//
// It is a fast path, not a second decoder: whenever it meets anything it
// cannot vouch for (an error body, invalid JSON, a type encoding/json would
// refuse, a number that is not a plain int, a duplicate or case-folded key,
// an escaped key, nesting deeper than it tracks), it reports !ok and
// decodeChunk runs decodeChunkReference, whose result is then the answer.
// So every error, and its message, comes from encoding/json; the fuzzer
// FuzzChunkScanMatchesReference holds the two to the same values.

// The keys the reference decoder's structs declare, level by level, read
// from their json tags (jsonKeys): a key the scanner does not read itself
// but the reference declares, exactly or case-insensitively (encoding/json
// accepts "Content" for `json:"content"`), sends the chunk to the
// reference. So a field added to chunkJSON or responseJSON (tool_calls)
// is read from every answer that carries it, at the reference's speed,
// with no change here; reading it fast is a case in the scanner's switch,
// as token_ids, prompt_token_ids and logprobs are (tokenscan.go).
var (
	topKeys    = jsonKeys(reflect.TypeFor[chunkJSON]())
	choiceKeys = jsonKeys(elemOf(reflect.TypeFor[chunkJSON](), "Choices"))
	// messageChoiceKeys: a plain answer's choice (responseJSON)
	messageChoiceKeys = jsonKeys(elemOf(reflect.TypeFor[responseJSON](), "Choices"))
	deltaKeys         = jsonKeys(reflect.TypeFor[textJSON]())
	usageKeys         = jsonKeys(reflect.TypeFor[usageJSON]())
	detailsKeys       = jsonKeys(reflect.TypeFor[promptTokensDetailsJSON]())
	// A choice's logprobs, their content's entries and an entry's
	// alternatives (logprobsJSON).
	logprobsKeys    = jsonKeys(reflect.TypeFor[logprobsJSON]())
	logprobEntry    = elemOf(reflect.TypeFor[logprobsJSON](), "Content")
	logprobKeys     = jsonKeys(logprobEntry)
	alternativeKeys = jsonKeys(elemOf(logprobEntry, "TopLogprobs"))
)

// elemOf is the element type of t's slice field name.
func elemOf(t reflect.Type, name string) reflect.Type {
	f, ok := t.FieldByName(name)
	if !ok {
		panic("chunkscan: " + t.String() + " has no field " + name)
	}
	return f.Type.Elem()
}

// jsonKeys lists the keys encoding/json decodes into a struct of type t:
// each field's json name (its tag, else its Go name), embedded structs'
// fields included, "-" fields left out.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			keys = append(keys, jsonKeys(f.Type)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		keys = append(keys, name)
	}
	return keys
}

// chunkChoice is what one choices[] entry carries.
type chunkChoice struct {
	index                         int
	content, reasoning, reasonAlt jsonlex.Span // reasonAlt: reasoning_content
	finish                        jsonlex.Span
}

// Shape is where a choice keeps its text: a streamed chunk's
// choices[].delta, a plain answer's choices[].message. The two bodies are
// otherwise the same object, and the reference decoders' structs differ
// only there (chunkJSON, responseJSON).
type Shape struct {
	text string   // "delta" or "message"
	keys []string // the choice's keys in the reference's struct
}

// ChunkShape is a streamed chunk's, MessageShape a plain answer's.
var (
	ChunkShape   = Shape{"delta", choiceKeys}
	MessageShape = Shape{"message", messageChoiceKeys}
)

// Scan decodes a chunk or a plain answer (by shape) as its reference
// would; picked says whether a choice with index 0 was there. Its token
// ids, logprobs and text are read into tb (reset first): d's token lists
// are slices of it and its strings views of it, valid until tb's next use.
func Scan(data []byte, shape Shape, tb *TokenBuf) (d Delta, picked, ok bool) {
	tb.reset()
	s := chunkScanner{Cursor: jsonlex.Cursor{B: data}, shape: shape, tb: tb}
	var f answerFields
	if !s.answer(&f) {
		return Delta{}, false, false
	}
	return f.delta(data, tb), f.picked, true
}

// answerFields are an answer's top-level members as the scanner found
// them: spans of the body, its text not yet copied out.
type answerFields struct {
	model, object jsonlex.Span
	pick          chunkChoice
	picked        bool // a choice with index 0 was there
	usage         bool
	counts        usageCounts
}

// answer scans the whole body, one object, into f; false when the
// reference decoder must read it (malformed, an error body, a duplicate
// key, a key the reference would read differently).
func (s *chunkScanner) answer(f *answerFields) bool {
	var seen uint8
	resumed, whole := s.resume(f, &seen)
	if whole {
		return true
	}
	if !resumed {
		s.WS()
		if !s.Consume('{') {
			return false
		}
	}
	for first := true; ; first = false {
		key := choicesKey
		if resumed {
			resumed = false
		} else {
			var done, ok bool
			if key, done, ok = s.member(first); !ok {
				return false
			} else if done {
				break
			}
			if s.tb.Stream && string(key.b) == "choices" {
				s.remember(f, seen)
			}
		}
		bit, ok := s.topMember(key, f)
		if !ok {
			return false
		}
		if seen&bit != 0 {
			return false // duplicate key: encoding/json merges, last wins
		}
		seen |= bit
	}
	s.WS()
	if s.I != len(s.B) {
		return false
	}
	if s.headEnd > 0 {
		s.rememberText(f)
	}
	return true
}

var choicesKey = strKey{b: []byte("choices")}

// topMember reads the value of the top-level member key into f. bit is
// the member's own (0 for a key the reference ignores, which may repeat),
// to catch a duplicate; !ok when the reference decoder must read the body.
func (s *chunkScanner) topMember(key strKey, f *answerFields) (bit uint8, ok bool) {
	switch string(key.b) {
	case "model":
		f.model, ok = s.stringOrNull()
		return 1 << 0, ok
	case "choices":
		return 1 << 1, s.choices(&f.pick, &f.picked)
	case "usage":
		f.usage, f.counts, ok = s.usage()
		return 1 << 2, ok
	case "object":
		if f.object, ok = s.stringOrNull(); !ok {
			return 0, false
		}
		// An error body is the reference's to classify; an escaped
		// value is compared there too, rather than unquoted here.
		return 1 << 3, !f.object.Esc && string(s.B[f.object.Lo:f.object.Hi]) != "error"
	case "error":
		// Any value but null makes the chunk an error event.
		return 1 << 4, s.null()
	case "message":
		return 1 << 5, s.SkipValue()
	case "prompt_token_ids":
		return 1 << 6, s.int32s(&s.tb.prompt)
	default:
		return 0, s.unknown(key, topKeys)
	}
}

// delta is the Delta f found in data, its token lists slices of tb.
func (f *answerFields) delta(data []byte, tb *TokenBuf) Delta {
	d := Delta{PromptTokens: f.counts.prompt, CompletionTokens: f.counts.compl, CachedTokens: f.counts.cached, UsageKnown: f.usage}
	tb.fill(&d)
	reasoning := f.pick.reasoning
	if reasoning.Empty() { // pickReasoning: an empty `reasoning` does not count
		reasoning = f.pick.reasonAlt
	}
	// The text is unescaped into tb's scratch and the fields are views of
	// it, as the token lists are slices of tb: a stream's TokenBuf, reused
	// chunk after chunk, makes no allocation a chunk (it was one string a
	// chunk, a third of decoding one in a stream's profile); a plain
	// answer's, used once, makes one. The caller copies what it keeps
	// before tb's next use (answer.add).
	spans := [4]jsonlex.Span{f.model, reasoning, f.pick.content, f.pick.finish}
	size := 0 // unescaping only shortens: room for the raw spans is enough
	for _, sp := range spans {
		size += sp.Hi - sp.Lo
	}
	if size == 0 {
		return d
	}
	buf := tb.text[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	var ends [4]int
	for i, sp := range spans {
		buf = jsonlex.AppendSpan(buf, data, sp)
		ends[i] = len(buf)
	}
	if len(buf) == 0 {
		return d
	}
	tb.text = buf
	all := unsafe.String(unsafe.SliceData(buf), len(buf))
	d.Model = all[:ends[0]]
	d.Reasoning = all[ends[0]:ends[1]]
	d.Content = all[ends[1]:ends[2]]
	d.FinishReason = all[ends[2]:ends[3]]
	return d
}

// chunkScanner is a cursor over one chunk.
type chunkScanner struct {
	jsonlex.Cursor
	shape Shape
	tb    *TokenBuf // where the picked choice's token ids and logprobs go
	// headEnd is where the chunk's head ends when it is tb's (remembered
	// or resumed by this scan), else 0.
	headEnd int
}

// member steps to the next key of an object whose '{' was consumed: it
// returns the key (raw, between its quotes) with the cursor after the ':',
// or done with the cursor after the '}'.
func (s *chunkScanner) member(first bool) (key strKey, done, ok bool) {
	s.WS()
	if s.I >= len(s.B) {
		return strKey{}, false, false
	}
	if s.B[s.I] == '}' {
		s.I++
		return strKey{}, true, true
	}
	if !first {
		if s.B[s.I] != ',' {
			return strKey{}, false, false
		}
		s.I++
		s.WS()
	}
	sp, ok := s.Str()
	if !ok || sp.Esc {
		return strKey{}, false, false // an escaped key may spell a known one
	}
	if !s.Consume(':') {
		return strKey{}, false, false
	}
	s.WS()
	return strKey{s.B[sp.Lo:sp.Hi], sp.High}, false, true
}

// strKey is an object key as it appears in the input (it has no escapes).
type strKey struct {
	b    []byte
	high bool // contains a byte >= 0x80
}

// unknown skips the value of a key the reference ignores, unless the key
// matches one of known, exactly or case-insensitively (the reference would
// take it).
func (s *chunkScanner) unknown(key strKey, known []string) bool {
	for _, k := range known {
		if foldMatch(key, k) {
			return false
		}
	}
	return s.SkipValue()
}

// foldMatch reports whether encoding/json would match key to the field
// name k (an exact match was already ruled out). encoding/json folds like
// bytes.EqualFold, Unicode included ("ſ" matches "s", "K" (Kelvin) "k"),
// so only an ASCII key must have k's length.
func foldMatch(key strKey, k string) bool {
	if key.high {
		return bytes.EqualFold(key.b, []byte(k))
	}
	if len(key.b) != len(k) {
		return false
	}
	for i, c := range key.b {
		if lower(c) != lower(k[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// null consumes a null literal.
func (s *chunkScanner) null() bool { return s.Literal("null") }

// stringOrNull reads what a plain string field accepts without error.
func (s *chunkScanner) stringOrNull() (jsonlex.Span, bool) {
	if s.I < len(s.B) && s.B[s.I] == '"' {
		return s.Str()
	}
	return jsonlex.Span{}, s.null()
}

// intOrNull reads what an int field accepts: null (no change: 0) or a
// plain integer small enough that it cannot overflow. A fraction or an
// exponent, which encoding/json refuses for an int, goes to the reference.
func (s *chunkScanner) intOrNull() (int, bool) {
	if s.null() {
		return 0, true
	}
	neg := false
	if s.I < len(s.B) && s.B[s.I] == '-' {
		neg = true
		s.I++
	}
	start, n := s.I, 0
	for s.I < len(s.B) && '0' <= s.B[s.I] && s.B[s.I] <= '9' {
		n = n*10 + int(s.B[s.I]-'0')
		s.I++
	}
	digits := s.I - start
	if digits == 0 || digits > 18 || (digits > 1 && s.B[start] == '0') {
		return 0, false
	}
	if s.I < len(s.B) && (s.B[s.I] == '.' || s.B[s.I] == 'e' || s.B[s.I] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// choices reads the choices array, keeping the first entry with index 0
// as the reference's loop does.
func (s *chunkScanner) choices(pick *chunkChoice, picked *bool) bool {
	if s.null() {
		return true
	}
	if !s.Consume('[') {
		return false
	}
	if s.Consume(']') {
		return true
	}
	for {
		s.WS()
		var c chunkChoice
		m := s.tb.mark()
		if !s.null() && !s.choice(&c) {
			return false
		}
		// A null entry is a zero choice, so index 0, for the reference too.
		if c.index == 0 && !*picked {
			*pick, *picked = c, true
		} else {
			s.tb.truncate(m) // another choice's tokens are not recorded
		}
		if s.Consume(']') {
			return true
		}
		if !s.Consume(',') {
			return false
		}
	}
}

func (s *chunkScanner) choice(c *chunkChoice) bool {
	if !s.Consume('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return false
		}
		if done {
			return true
		}
		bit := uint8(0)
		switch k := string(key.b); k {
		case "index":
			bit = 1 << 0
			c.index, ok = s.intOrNull()
		case "finish_reason":
			bit = 1 << 2
			c.finish, ok = s.stringOrNull()
		case "token_ids":
			bit = 1 << 3
			ok = s.int32s(&s.tb.ids)
		case "logprobs":
			bit = 1 << 4
			ok = s.logprobs()
		default:
			if k == s.shape.text {
				bit = 1 << 1
				ok = s.null() || s.delta(c)
			} else {
				ok = s.unknown(key, s.shape.keys)
			}
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

func (s *chunkScanner) delta(c *chunkChoice) bool {
	if !s.Consume('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return false
		}
		if done {
			return true
		}
		bit := uint8(0)
		switch string(key.b) {
		case "content":
			bit = 1 << 0
			c.content, ok = s.stringOrNull()
		case "reasoning":
			bit = 1 << 1
			c.reasoning, ok = s.stringOrNull()
		case "reasoning_content":
			bit = 1 << 2
			c.reasonAlt, ok = s.stringOrNull()
		case "token_ids":
			bit = 1 << 3
			ok = s.int32s(&s.tb.deltaIDs)
		case "tool_calls":
			// null or [] (vLLM's plain message always has the key) is
			// none; a call is the reference's to read.
			bit = 1 << 4
			ok = s.null() || s.Consume('[') && s.Consume(']')
		default:
			ok = s.unknown(key, deltaKeys)
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// usage reads the usage field: null is no usage, an object is a usage
// even when empty.
func (s *chunkScanner) usage() (known bool, c usageCounts, ok bool) {
	if s.null() {
		return false, c, true
	}
	if !s.Consume('{') {
		return false, c, false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return false, c, false
		}
		if done {
			return true, c, true
		}
		bit := uint8(0)
		switch string(key.b) {
		case "prompt_tokens":
			bit = 1 << 0
			c.prompt, ok = s.intOrNull()
		case "completion_tokens":
			bit = 1 << 1
			c.compl, ok = s.intOrNull()
		case "prompt_tokens_details":
			bit = 1 << 2
			c.cached, ok = s.promptTokensDetails()
		default:
			ok = s.unknown(key, usageKeys)
		}
		if !ok || seen&bit != 0 {
			return false, c, false
		}
		seen |= bit
	}
}

// usageCounts are the figures a usage object carries.
type usageCounts struct{ prompt, compl, cached int }

// promptTokensDetails reads usage's prompt_tokens_details
// (promptTokensDetailsJSON): null or an object whose cached_tokens it
// returns, its other keys (audio_tokens) skipped.
func (s *chunkScanner) promptTokensDetails() (cached int, ok bool) {
	if s.null() {
		return 0, true
	}
	if !s.Consume('{') {
		return 0, false
	}
	seen := false
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return 0, false
		}
		if done {
			return cached, true
		}
		if string(key.b) != "cached_tokens" {
			if !s.unknown(key, detailsKeys) {
				return 0, false
			}
			continue
		}
		if seen {
			return 0, false // duplicate: the reference's to merge
		}
		seen = true
		if cached, ok = s.intOrNull(); !ok {
			return 0, false
		}
	}
}

// ChunkKeys are the keys the reference declares for a chunk's top level,
// its choice, its delta and its usage: a second fast path (the fastjson
// variant the benchmarks measure the scanner against) must send a chunk
// with a key that folds to one of them to the reference, as Scan does.
func ChunkKeys() (top, choice, delta, usage []string) {
	return topKeys, choiceKeys, deltaKeys, usageKeys
}
