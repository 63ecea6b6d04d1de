// Package schemagen draws JSON values valid for a JSON Schema, as a server
// with structured outputs writes them, and spoils them on purpose: the
// mock's answers in the shape a request asks (mockserver's
// schema.go). Every draw comes from the caller's rand, so a value is a
// pure function of its seed.
package schemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The ways Spoil makes a value not valid.
const (
	SpoilCut       = iota // the JSON stops halfway
	SpoilMissing          // a required property is left out (else: the wrong type)
	SpoilWrongType        // a value of another type than the schema's
	SpoilKinds
)

// Gen draws a value valid for a JSON Schema: objects (properties,
// required), strings (enum, const, lengths, a few formats), numbers and
// integers (bounds), booleans, null, arrays (items, prefixItems, lengths),
// anyOf/oneOf (one branch), allOf (merged), $ref to the schema's own
// $defs/definitions, nested to a bounded depth. Its strings are made of
// words' pieces.
type Gen struct {
	rng   *rand.Rand
	root  any
	words []string
	left  int // the values it may still draw: maxValues at first
}

// New is a generator for the schema root (nil: any object), drawing from
// rng and writing strings of the pieces words.
func New(rng *rand.Rand, root any, words []string) *Gen {
	return &Gen{rng: rng, root: root, words: words, left: maxValues}
}

// Value is a value valid for the generator's schema.
func (g *Gen) Value() any { return g.value(g.root, 0) }

// A schema is the client's: what it asks is bounded, so that a schema
// whose $refs branch, or whose minItems or minLength is huge, costs little.
// Past a bound the value is not valid for it.
const (
	maxSchemaDepth = 24
	maxValues      = 1 << 14 // values in all
	maxItems       = 1 << 10 // an array's
	maxLength      = 1 << 12 // a string's runes
)

func (g *Gen) value(schema any, depth int) any {
	m, ok := schema.(map[string]any)
	if !ok {
		return nil // true, false or nonsense: anything goes, null does
	}
	if depth > maxSchemaDepth || g.left <= 0 {
		return nil
	}
	g.left--
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
func (g *Gen) typeOf(m map[string]any) string {
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

func (g *Gen) object(m map[string]any, depth int) any {
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
		out["answer"] = g.Words(1, 4)
	}
	return out
}

func (g *Gen) array(m map[string]any, depth int) any {
	lo, hi := 1, 3
	if n, ok := schemaNum(m["minItems"]); ok {
		lo = int(min(n, maxItems))
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
		for len(out) < n && g.left > 0 {
			out = append(out, g.value(items, depth+1))
		}
	}
	if out == nil {
		out = []any{}
	}
	return out
}

func (g *Gen) str(m map[string]any) string {
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
		lo = int(min(n, maxLength))
	}
	if n, ok := schemaNum(m["maxLength"]); ok {
		hi = int(n)
	}
	s := g.Words(2, 8)
	for utf8.RuneCountInString(s) < lo {
		s += g.Words(1, 4)
	}
	if r := []rune(s); len(r) > max(hi, lo) && hi >= lo {
		s = string(r[:hi])
	}
	return s
}

// Words is a few of the generator's word pieces, trimmed.
func (g *Gen) Words(lo, hi int) string {
	n := lo + g.rng.IntN(hi-lo+1)
	var b strings.Builder
	for range n {
		b.WriteString(g.words[g.rng.IntN(len(g.words))])
	}
	return strings.TrimSpace(b.String())
}

// resolve finds a $ref within the schema itself: "#", "#/$defs/NAME",
// "#/definitions/NAME" or any JSON pointer into it; nil when it is none.
func (g *Gen) resolve(ref string) any {
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
func (g *Gen) integer(m map[string]any) int64 {
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
func (g *Gen) number(m map[string]any) float64 {
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

// Spoil makes text, v's JSON, not valid for root (nil: for any object)
// in the given way.
func Spoil(v any, text []byte, root any, how int) []byte {
	obj, isObj := v.(map[string]any)
	switch how {
	case SpoilMissing:
		if isObj && root != nil {
			if req := required(root); len(req) > 0 {
				delete(obj, req[0])
				if b, err := Marshal(obj); err == nil {
					return b
				}
			}
		}
		fallthrough
	case SpoilWrongType:
		if isObj && len(obj) > 0 {
			k := slices.Sorted(mapKeys(obj))[0]
			obj[k] = wrongType(obj[k])
			if b, err := Marshal(obj); err == nil {
				return b
			}
		}
		if root == nil {
			return []byte(`["not", "an", "object"]`)
		}
		if b, err := Marshal(wrongType(v)); err == nil {
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

// Marshal writes v as JSON with <, > and & as they are, as a model writes.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
