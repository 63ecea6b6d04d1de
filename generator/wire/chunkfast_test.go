package wire

import (
	"bytes"
	"unicode/utf8"

	"github.com/synthgen/synthgen/generator/wire/codec"
	"github.com/valyala/fastjson"
)

// fastChunk is scanChunk written on github.com/valyala/fastjson, kept so
// that BenchmarkStreamDecoder can compare the two (docs/decisions/2026-11-chunk-scanner.md: chunkscan
// stays). Like scanChunk it is a fast path, not a second decoder: it
// answers only what it can vouch for is exactly encoding/json's answer, and
// reports !ok for the rest
// (an error body, invalid JSON, a type encoding/json would refuse, a number
// that is not an int, a duplicate or case-folded key, a string whose
// decoding could differ), which decodeChunkReference then decodes. So every
// error, and its message, comes from encoding/json; sameDecode, and so the
// fuzzer FuzzChunkScanMatchesReference, holds it to the same values.
//
// fastjson's Parse is lenient (NaN, "1.2.3", unvalidated strings), so the
// chunk is first checked by fastjson.Validate, which is strict RFC 8259 JSON
// like encoding/json's scanner.
//
// Validate misses a control character in a string that has an escape after
// it ("\x14\\b" passes: only the text after the last escape is checked), so
// any byte below 0x20 sends the chunk to the reference first. Valid JSON has
// them only as whitespace between tokens (\t \n \r), which an SSE data line
// cannot hold (\n, \r) and vLLM does not write (\t).
func fastChunk(data []byte) (codec.Delta, bool) {
	for _, c := range data {
		if c < 0x20 {
			return codec.Delta{}, false
		}
	}
	if fastjson.ValidateBytes(data) != nil {
		return codec.Delta{}, false
	}
	p := chunkParsers.Get()
	defer chunkParsers.Put(p)
	v, err := p.ParseBytes(data)
	if err != nil { // deeper than fastjson.MaxDepth
		return codec.Delta{}, false
	}
	top, err := v.Object()
	if err != nil {
		return codec.Delta{}, false
	}
	var (
		c          fastChunkState
		model      []byte
		seen       uint8
		ok         = true
		usageKnown bool
		prompt     int
		compl      int
	)
	top.Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		var bit uint8
		switch string(key) {
		case "model":
			bit = 1 << 0
			model, ok = fastString(v)
		case "choices":
			bit = 1 << 1
			ok = c.choices(v)
		case "usage":
			bit = 1 << 2
			usageKnown, prompt, compl, ok = fastUsage(v)
		case "object":
			bit = 1 << 3
			var object []byte
			object, ok = fastString(v)
			ok = ok && string(object) != "error" // an error body is the reference's
		case "error":
			bit = 1 << 4
			ok = v.Type() == fastjson.TypeNull // anything else makes an error event
		case "message":
			bit = 1 << 5 // json.RawMessage: any value
		default:
			ok = !foldsTo(key, topKeys)
		}
		ok = ok && seen&bit == 0 // duplicate: encoding/json merges, last wins
		seen |= bit
	})
	if !ok {
		return codec.Delta{}, false
	}

	d := codec.Delta{PromptTokens: prompt, CompletionTokens: compl, UsageKnown: usageKnown}
	reasoning := c.reasoning
	if len(reasoning) == 0 { // pickReasoning: an empty `reasoning` does not count
		reasoning = c.reasonAlt
	}
	// One allocation for all the text, copied out of the parser's buffer
	// before it goes back to the pool: the fields are slices of one string,
	// so keeping one keeps the chunk's text (a few hundred bytes) alive;
	// answer keeps one chunk's Model and copies the text out.
	n := len(model) + len(reasoning) + len(c.content) + len(c.finish)
	if n == 0 {
		return d, true
	}
	var arr [512]byte
	buf := append(arr[:0], model...)
	buf = append(buf, reasoning...)
	buf = append(buf, c.content...)
	buf = append(buf, c.finish...)
	all := string(buf)
	i := 0
	d.Model, i = all[i:i+len(model)], i+len(model)
	d.Reasoning, i = all[i:i+len(reasoning)], i+len(reasoning)
	d.Content, i = all[i:i+len(c.content)], i+len(c.content)
	d.FinishReason = all[i : i+len(c.finish)]
	return d, true
}

var chunkParsers fastjson.ParserPool

// The keys the reference declares at each level (codec.ChunkKeys).
var topKeys, choiceKeys, deltaKeys, usageKeys = codec.ChunkKeys()

// foldsTo reports whether encoding/json would match key to one of known
// (an exact match was already ruled out). encoding/json folds keys like
// bytes.EqualFold, Unicode included ("ſ" matches "s", "K" (Kelvin) "k").
func foldsTo(key []byte, known []string) bool {
	for _, k := range known {
		if bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// fastChunkState is choice 0's text, as slices of the parser's buffer.
type fastChunkState struct {
	picked                                bool
	content, reasoning, reasonAlt, finish []byte // reasonAlt: reasoning_content
}

// choices reads the choices array, keeping the first entry with index 0
// as the reference's loop does; every entry must still decode.
func (c *fastChunkState) choices(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeNull:
		return true
	case fastjson.TypeArray:
	default:
		return false
	}
	arr, _ := v.Array()
	for _, e := range arr {
		var ch fastChunkState
		index := 0
		switch e.Type() {
		case fastjson.TypeNull: // a zero choice, so index 0, for the reference too
		case fastjson.TypeObject:
			var ok bool
			if index, ok = ch.choice(e); !ok {
				return false
			}
		default:
			return false
		}
		if index == 0 && !c.picked {
			*c = ch
			c.picked = true
		}
	}
	return true
}

func (c *fastChunkState) choice(v *fastjson.Value) (index int, ok bool) {
	o, _ := v.Object()
	ok = true
	var seen uint8
	o.Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		var bit uint8
		switch string(key) {
		case "index":
			bit = 1 << 0
			index, ok = fastInt(v)
		case "delta":
			bit = 1 << 1
			ok = c.delta(v)
		case "finish_reason":
			bit = 1 << 2
			c.finish, ok = fastString(v)
		default:
			ok = !foldsTo(key, choiceKeys)
		}
		ok = ok && seen&bit == 0
		seen |= bit
	})
	return index, ok
}

func (c *fastChunkState) delta(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeNull:
		return true
	case fastjson.TypeObject:
	default:
		return false
	}
	o, _ := v.Object()
	ok := true
	var seen uint8
	o.Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		var bit uint8
		switch string(key) {
		case "content":
			bit = 1 << 0
			c.content, ok = fastString(v)
		case "reasoning":
			bit = 1 << 1
			c.reasoning, ok = fastString(v)
		case "reasoning_content":
			bit = 1 << 2
			c.reasonAlt, ok = fastString(v)
		default:
			ok = !foldsTo(key, deltaKeys)
		}
		ok = ok && seen&bit == 0
		seen |= bit
	})
	return ok
}

// fastUsage reads the usage field: null is no usage, an object is a usage
// even when empty.
func fastUsage(v *fastjson.Value) (known bool, prompt, compl int, ok bool) {
	switch v.Type() {
	case fastjson.TypeNull:
		return false, 0, 0, true
	case fastjson.TypeObject:
	default:
		return false, 0, 0, false
	}
	o, _ := v.Object()
	ok = true
	var seen uint8
	o.Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		var bit uint8
		switch string(key) {
		case "prompt_tokens":
			bit = 1 << 0
			prompt, ok = fastInt(v)
		case "completion_tokens":
			bit = 1 << 1
			compl, ok = fastInt(v)
		default:
			ok = !foldsTo(key, usageKeys)
		}
		ok = ok && seen&bit == 0
		seen |= bit
	})
	return true, prompt, compl, ok
}

// fastInt reads what an int field accepts: null (0) or an integer that
// fits (Validate has checked the JSON number grammar; fastjson's Int
// refuses a fraction, an exponent and an overflow, as encoding/json does).
func fastInt(v *fastjson.Value) (int, bool) {
	switch v.Type() {
	case fastjson.TypeNull:
		return 0, true
	case fastjson.TypeNumber:
		n, err := v.Int()
		return n, err == nil
	}
	return 0, false
}

// fastString reads what a plain string field accepts without error: a
// string, or null (""). fastjson unescapes as encoding/json does except
// for what encoding/json turns into U+FFFD (invalid UTF-8, a surrogate
// escape that is not half of a pair), which fastjson keeps as is or
// decodes otherwise; a text where that could have happened goes to the
// reference.
func fastString(v *fastjson.Value) ([]byte, bool) {
	switch v.Type() {
	case fastjson.TypeNull:
		return nil, true
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return b, plainText(b)
	}
	return nil, false
}

// plainText reports whether fastjson's decoding of a string is certainly
// encoding/json's: valid UTF-8 without U+FFFD, and no `\u` left over from
// a lone surrogate escape.
func plainText(b []byte) bool {
	for i, c := range b {
		if c >= utf8.RuneSelf || c == '\\' {
			rest := b[i:]
			return utf8.Valid(rest) && !bytes.Contains(rest, []byte("\uFFFD")) && !bytes.Contains(rest, []byte(`\u`))
		}
	}
	return true
}
