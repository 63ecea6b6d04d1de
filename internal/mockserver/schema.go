package mockserver

// Answers in the shape a request asks: a response_format of type
// json_schema (or json_object), or older vLLM's guided_json and newer
// vLLM's structured_outputs.json in the body, makes the answer's content
// JSON valid for the schema, as a server with structured outputs writes
// it. Its reasoning comes first, as ever (a server with a reasoning parser
// applies the grammar only after the thought; with ReasoningField none the
// thought is in think tags before the JSON, as a server that does not
// constrain the thought writes it, which no client can parse as JSON).
//
// The JSON is a pure function of the seed and the prompt. Options.
// RateInvalidJSON makes a share of answers not valid (cut short, a
// required key missing, a value of the wrong type): which ones is a draw
// from the seed and the arrival number, like the other rates, so a retry
// of the same prompt may well be valid.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// invalidJSONSalt keeps RateInvalidJSON's draw apart from the others'.
const invalidJSONSalt = 0x736368656d61 // "schema"

// FaultInvalidJSON is the kind label of mock_faults_injected_total for an
// answer made not valid for its schema on purpose (Stats.InvalidJSON).
const FaultInvalidJSON = "invalid_json"

// The ways RateInvalidJSON spoils an answer.
const (
	spoilCut       = iota // the JSON stops halfway
	spoilMissing          // a required property is left out (else: the wrong type)
	spoilWrongType        // a value of another type than the schema's
	spoilKinds
)

// answerShape is what a request asks its content to be.
type answerShape struct {
	root   any  // the JSON Schema, decoded; nil for json_object
	object bool // json_object: some JSON object
}

// requestShape reads the shape a request asks for: its response_format,
// else guided_json (vLLM before 0.12) or structured_outputs.json (the
// vLLM releases that replaced it); nil when none. Its error is the 400 a
// server answers.
func (r *chatRequest) requestShape() (*answerShape, error) {
	if len(r.ResponseFormat) > 0 && !isNull(r.ResponseFormat) {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(r.ResponseFormat, &rf); err != nil {
			return nil, fmt.Errorf("response_format: %v", err)
		}
		switch rf.Type {
		case "text":
			return nil, nil
		case "json_object":
			return &answerShape{object: true}, nil
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, errors.New("response_format.json_schema.schema: field required")
			}
			return schemaShape("response_format.json_schema.schema", rf.JSONSchema.Schema)
		}
		return nil, fmt.Errorf("response_format.type: %q is not one of text, json_object, json_schema", rf.Type)
	}
	if len(r.GuidedJSON) > 0 && !isNull(r.GuidedJSON) {
		return schemaShape("guided_json", r.GuidedJSON)
	}
	if len(r.StructuredOutputs) > 0 && !isNull(r.StructuredOutputs) {
		var so struct {
			JSON json.RawMessage `json:"json"`
		}
		if err := json.Unmarshal(r.StructuredOutputs, &so); err != nil {
			return nil, fmt.Errorf("structured_outputs: %v", err)
		}
		if len(so.JSON) > 0 {
			return schemaShape("structured_outputs.json", so.JSON)
		}
	}
	return nil, nil
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// schemaShape decodes a schema given as an object, or as a string holding
// one (vLLM takes guided_json either way).
func schemaShape(field string, raw json.RawMessage) (*answerShape, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	if s, ok := v.(string); ok {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("%s: a string that is no JSON Schema: %v", field, err)
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: must be a JSON Schema object", field)
	}
	return &answerShape{root: v}, nil
}

// shapedText is an answer's JSON content cut into token pieces.
type shapedText struct {
	escaped [][]byte // each piece inside a JSON string: for plain answers
	content [][]byte // each piece as a content delta
	closing [][]byte // each piece after the think tags, as a content delta (ReasoningField none)
}

// piece reports whether the i-th token of p is a piece of its JSON, and which.
func (p *plan) piece(i int) (int, bool) {
	k := i - p.reasoning
	return k, p.shaped != nil && k >= 0 && k < len(p.shaped.escaped)
}

// shapeAnswer makes p's content the JSON sh asks for: the answer is its
// reasoning, then the JSON, cut at max_tokens (limit) when both do not
// fit. The length fault, which comes after, runs it to limit: its tokens
// past the JSON are word pieces.
func (s *Server) shapeAnswer(p *plan, sh *answerShape, hash, id uint64, limit int) {
	rng := rand.New(rand.NewPCG(uint64(s.opts.Seed)^0x6a736f6e, hash))
	g := &valueGen{rng: rng, root: sh.root}
	var v any
	if sh.object {
		v = map[string]any{"answer": g.words(1, 6), "value": rng.IntN(100)}
	} else {
		v = g.value(sh.root, 0)
	}
	text, err := marshal(v)
	if err != nil {
		text = []byte(`{}`)
	}
	if s.opts.RateInvalidJSON > 0 && s.draw(id, invalidJSONSalt) < s.opts.RateInvalidJSON {
		text = spoil(v, text, sh, int(s.draw(id, invalidJSONSalt+1)*spoilKinds))
		s.invalidJSON.Add(1)
		s.faultsMetric.WithLabelValues(FaultInvalidJSON).Inc()
	}
	p.shaped = splitPieces(text, s.opts.ReasoningField == FieldNone)
	p.total, p.finish = p.reasoning+len(p.shaped.escaped), "stop"
	if p.total > limit {
		p.total, p.finish = limit, "length"
		p.reasoning = min(p.reasoning, limit)
	}
}

// spoil makes text not valid for sh in the given way.
func spoil(v any, text []byte, sh *answerShape, how int) []byte {
	obj, isObj := v.(map[string]any)
	switch how {
	case spoilMissing:
		if isObj && sh.root != nil {
			if req := required(sh.root); len(req) > 0 {
				delete(obj, req[0])
				if b, err := marshal(obj); err == nil {
					return b
				}
			}
		}
		fallthrough
	case spoilWrongType:
		if isObj && len(obj) > 0 {
			k := slices.Sorted(mapKeys(obj))[0]
			obj[k] = wrongType(obj[k])
			if b, err := marshal(obj); err == nil {
				return b
			}
		}
		if sh.object {
			return []byte(`["not", "an", "object"]`)
		}
		if b, err := marshal(wrongType(v)); err == nil {
			return b
		}
	}
	return text[:len(text)/2]
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// wrongType is a value of another JSON type than v.
func wrongType(v any) any {
	switch v.(type) {
	case string:
		return 12345
	case nil:
		return []any{"null", "expected"}
	}
	return "not the type asked for"
}

func required(schema any) []string {
	m, _ := schema.(map[string]any)
	list, _ := m["required"].([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// marshal writes v as JSON with <, > and & as they are, as a model writes.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// splitPieces cuts text into pieces of about four bytes, on character
// boundaries, each JSON-encoded for the plain and the streamed answer.
func splitPieces(text []byte, none bool) *shapedText {
	st := &shapedText{}
	for len(text) > 0 {
		n := min(4, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		piece := string(text[:n])
		text = text[n:]
		q := quote(piece)
		st.escaped = append(st.escaped, q[1:len(q)-1])
		st.content = append(st.content, delta("content", q))
		if none && len(st.closing) == 0 {
			st.closing = append(st.closing, delta("content", quote(thinkClose+piece)))
		}
	}
	return st
}

// valueGen draws a value valid for a JSON Schema: objects (properties,
// required), strings (enum, const, lengths, a few formats), numbers and
// integers (bounds), booleans, null, arrays (items, prefixItems, lengths),
// anyOf/oneOf (one branch), allOf (merged), $ref to the schema's own
// $defs/definitions, nested to a bounded depth.
type valueGen struct {
	rng  *rand.Rand
	root any
}

const maxSchemaDepth = 24

func (g *valueGen) value(schema any, depth int) any {
	m, ok := schema.(map[string]any)
	if !ok {
		return nil // true, false or nonsense: anything goes, null does
	}
	if depth > maxSchemaDepth {
		return nil
	}
	if ref, ok := m["$ref"].(string); ok {
		if target := g.resolve(ref); target != nil {
			return g.value(target, depth+1)
		}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[g.rng.IntN(len(enum))]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 {
			return g.value(alts[g.rng.IntN(len(alts))], depth+1)
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		return g.value(merge(m, all), depth+1)
	}
	switch g.typeOf(m) {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, depth)
	case "integer":
		return g.integer(m)
	case "number":
		return g.number(m)
	case "boolean":
		return g.rng.IntN(2) == 1
	case "null":
		return nil
	}
	return g.str(m)
}

// typeOf is the schema's type: the first of a list that is not null (when
// there is one), else what its keywords imply.
func (g *valueGen) typeOf(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		var names []string
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				names = append(names, s)
			}
		}
		if len(names) > 0 {
			return names[g.rng.IntN(len(names))]
		}
		return "null"
	}
	switch {
	case m["properties"] != nil:
		return "object"
	case m["items"] != nil || m["prefixItems"] != nil:
		return "array"
	}
	return "string"
}

func (g *valueGen) object(m map[string]any, depth int) any {
	props, _ := m["properties"].(map[string]any)
	req := required(m)
	out := map[string]any{}
	for _, k := range slices.Sorted(mapKeys(props)) {
		if slices.Contains(req, k) || g.rng.IntN(2) == 0 {
			out[k] = g.value(props[k], depth+1)
		}
	}
	for _, k := range req {
		if _, ok := out[k]; !ok {
			out[k] = g.str(nil) // required but not described
		}
	}
	if len(props) == 0 && m["additionalProperties"] != false {
		out["answer"] = g.words(1, 4)
	}
	return out
}

func (g *valueGen) array(m map[string]any, depth int) any {
	lo, hi := 1, 3
	if n, ok := schemaNum(m["minItems"]); ok {
		lo = int(n)
	}
	if n, ok := schemaNum(m["maxItems"]); ok {
		hi = int(n)
	}
	hi = max(min(hi, lo+3), lo)
	var out []any
	prefix, _ := m["prefixItems"].([]any)
	for _, p := range prefix {
		out = append(out, g.value(p, depth+1))
	}
	n := lo + g.rng.IntN(hi-lo+1)
	if items, ok := m["items"]; ok && items != false {
		for len(out) < n {
			out = append(out, g.value(items, depth+1))
		}
	}
	if out == nil {
		out = []any{}
	}
	return out
}

func (g *valueGen) str(m map[string]any) string {
	switch f, _ := m["format"].(string); f {
	case "date-time":
		return fmt.Sprintf("2025-%02d-%02dT%02d:%02d:00Z", 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60))
	case "date":
		return fmt.Sprintf("2025-%02d-%02d", 1+g.rng.IntN(12), 1+g.rng.IntN(28))
	case "email":
		return fmt.Sprintf("user%d@example.com", g.rng.IntN(1000))
	case "uuid":
		return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", g.rng.Uint32(), g.rng.IntN(1<<16), g.rng.IntN(1<<12), g.rng.IntN(1<<12), g.rng.Int64N(1<<48))
	case "uri":
		return fmt.Sprintf("https://example.com/%d", g.rng.IntN(1000))
	}
	lo, hi := 1, 12
	if n, ok := schemaNum(m["minLength"]); ok {
		lo = int(n)
	}
	if n, ok := schemaNum(m["maxLength"]); ok {
		hi = int(n)
	}
	s := g.words(2, 8)
	for utf8.RuneCountInString(s) < lo {
		s += g.words(1, 4)
	}
	if r := []rune(s); len(r) > max(hi, lo) && hi >= lo {
		s = string(r[:hi])
	}
	return s
}

// words is a few of the vocabulary's word pieces, trimmed.
func (g *valueGen) words(lo, hi int) string {
	n := lo + g.rng.IntN(hi-lo+1)
	var b strings.Builder
	for range n {
		b.WriteString(vocabulary[g.rng.IntN(len(vocabulary))])
	}
	return strings.TrimSpace(b.String())
}

// resolve finds a $ref within the schema itself: "#", "#/$defs/NAME",
// "#/definitions/NAME" or any JSON pointer into it; nil when it is none.
func (g *valueGen) resolve(ref string) any {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	cur := g.root
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// merge folds allOf's schemas into one: their properties, required keys
// and other keywords (the first one's win).
func merge(m map[string]any, all []any) map[string]any {
	out := map[string]any{}
	props := map[string]any{}
	var req []any
	for _, s := range append([]any{m}, all...) {
		sm, ok := s.(map[string]any)
		if !ok {
			continue
		}
		for k, v := range sm {
			switch k {
			case "allOf":
			case "properties":
				if p, ok := v.(map[string]any); ok {
					for pk, pv := range p {
						if _, seen := props[pk]; !seen {
							props[pk] = pv
						}
					}
				}
			case "required":
				if r, ok := v.([]any); ok {
					req = append(req, r...)
				}
			default:
				if _, seen := out[k]; !seen {
					out[k] = v
				}
			}
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(req) > 0 {
		out["required"] = req
	}
	return out
}

// bounds is the range a number must be in, from minimum, maximum and
// their exclusive forms: 0 to 100 by default, and a bound alone opens a
// range of 100 beside it. exclusive says a bound may not be met itself.
func bounds(m map[string]any) (lo, hi float64, exclusive bool) {
	lo, hi = 0, 100
	minV, hasMin := schemaNum(m["minimum"])
	maxV, hasMax := schemaNum(m["maximum"])
	if v, ok := schemaNum(m["exclusiveMinimum"]); ok {
		minV, hasMin, exclusive = v, true, true
	}
	if v, ok := schemaNum(m["exclusiveMaximum"]); ok {
		maxV, hasMax, exclusive = v, true, true
	}
	switch {
	case hasMin && hasMax:
		lo, hi = minV, maxV
	case hasMin:
		lo, hi = minV, minV+100
	case hasMax:
		lo, hi = maxV-100, maxV
	}
	return lo, max(hi, lo), exclusive
}

// integer draws an integer within the schema's bounds.
func (g *valueGen) integer(m map[string]any) int64 {
	lo, hi, exclusive := bounds(m)
	a, b := math.Ceil(lo), math.Floor(hi)
	if exclusive {
		if a == lo {
			a++
		}
		if b == hi {
			b--
		}
	}
	if b < a {
		return int64(a)
	}
	return int64(a) + g.rng.Int64N(int64(b-a)+1)
}

// number draws a number strictly inside the schema's bounds (on them when
// they meet), to two decimals when that stays inside.
func (g *valueGen) number(m map[string]any) float64 {
	lo, hi, _ := bounds(m)
	f := lo + (0.1+0.8*g.rng.Float64())*(hi-lo)
	if r := math.Round(f*100) / 100; r > lo && r < hi {
		return r
	}
	return f
}

func schemaNum(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1<<53
}
