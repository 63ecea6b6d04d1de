package schemagen

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

var words = []string{" the", " answer", " is", " café", "\n"}

func draw(t testing.TB, schema string, seed uint64) any {
	t.Helper()
	var root any
	if err := json.Unmarshal([]byte(schema), &root); err != nil {
		t.Fatal(err)
	}
	return New(rand.New(rand.NewPCG(seed, 1)), root, words).Value()
}

// TestValue: a value follows its schema's keywords, and the same seed
// draws the same value.
func TestValue(t *testing.T) {
	const schema = `{"type": "object", "required": ["n", "tags", "kind", "pt"],
		"properties": {"n": {"type": "integer", "minimum": 3, "exclusiveMaximum": 5},
		"tags": {"type": "array", "items": {"type": "string", "minLength": 30}, "minItems": 2},
		"kind": {"enum": ["a", "b"]}, "pt": {"$ref": "#/$defs/pt"}},
		"$defs": {"pt": {"allOf": [{"properties": {"x": {"type": "number"}}, "required": ["x"]}]}}}`
	for seed := range uint64(20) {
		v := draw(t, schema, seed)
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			N    *int64
			Tags []string
			Kind string
			Pt   struct{ X *float64 }
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("seed %d: %s: %v", seed, b, err)
		}
		if got.N == nil || *got.N < 3 || *got.N >= 5 || len(got.Tags) < 2 || !slices.Contains([]string{"a", "b"}, got.Kind) || got.Pt.X == nil {
			t.Errorf("seed %d: %s, not valid for the schema", seed, b)
		}
		for _, s := range got.Tags {
			if len([]rune(s)) < 30 {
				t.Errorf("seed %d: tag %q shorter than minLength 30", seed, s)
			}
		}
		if again, _ := Marshal(draw(t, schema, seed)); string(again) != string(b) {
			t.Errorf("seed %d: %s, then %s", seed, b, again)
		}
	}
}

// TestValueBounded: a schema that asks a huge value costs a bounded one.
func TestValueBounded(t *testing.T) {
	for _, schema := range []string{
		`{"required": ["a", "b"], "properties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}}}`,
		`{"type": "array", "items": {"type": "array", "items": {}, "minItems": 1e9}, "minItems": 1e9}`,
		`{"type": "string", "minLength": 1e15}`,
	} {
		b, err := Marshal(draw(t, schema, 1))
		if err != nil || len(b) > 1<<20 {
			t.Errorf("%s: %d bytes, %v", schema, len(b), err)
		}
	}
}

// FuzzValue: any JSON a client sends as a schema draws a value that
// marshals, within the bounds.
func FuzzValue(f *testing.F) {
	for _, s := range []string{`{}`, `true`, `{"type": ["null", "integer"], "minimum": -1e300}`,
		`{"prefixItems": [{"const": 1}], "items": false}`, `{"$ref": "#/properties/a/0", "properties": {"a": [{"type": "boolean"}]}}`,
		`{"type": "string", "format": "uuid", "maxLength": -3}`, `{"anyOf": [], "oneOf": [{"$ref": "#"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		var root any
		if json.Unmarshal(schema, &root) != nil {
			return
		}
		b, err := Marshal(New(rand.New(rand.NewPCG(1, 2)), root, words).Value())
		if err != nil || len(b) > 1<<22 {
			t.Fatalf("%s: %d bytes, %v", schema, len(b), err)
		}
	})
}
