package shape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/synthgen/synthgen/job"
)

const judge = `{"type":"object","properties":{"score":{"type":"integer","minimum":1,"maximum":10},"reason":{"type":"string"},
"tags":{"type":"array","items":{"enum":["short","long"]}}},"required":["score","reason"],"additionalProperties":false}`

func compile(t testing.TB, schema string) *Validator {
	t.Helper()
	v, err := Compile(job.ResponseFormat{Type: job.FormatJSONSchema, Name: "judge", Schema: json.RawMessage(schema), Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCheck: what is valid for a schema passes, and what is not says where
// and why, with the start of the answer; json_object takes any one object.
func TestCheck(t *testing.T) {
	v := compile(t, judge)
	obj, err := Compile(job.ResponseFormat{Type: job.FormatJSONObject})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		v       *Validator
		content string
		want    string // "" valid, else in the error's text
	}{
		{"valid", v, `{"score": 8, "reason": "clear"}`, ""},
		{"valid, spaced, with an array", v, "\n {\"score\":10,\"reason\":\"\",\"tags\":[\"short\"]} \n", ""},
		{"a big integer is an integer", v, `{"score": 10.0, "reason": "x"}`, ""},
		{"wrong type", v, `{"score": "8", "reason": "clear"}`, "at '/score': got string, want integer"},
		{"out of range", v, `{"score": 11, "reason": "clear"}`, "at '/score': maximum: got 11, want 10"},
		{"missing key", v, `{"score": 3}`, "missing property 'reason'"},
		{"extra key", v, `{"score": 3, "reason": "r", "x": 1}`, "additional properties 'x' not allowed"},
		{"enum", v, `{"score": 3, "reason": "r", "tags": ["medium"]}`, "at '/tags/0'"},
		{"cut short", v, `{"score": 3, "reason": "the answer went on and`, "an answer cut at max_tokens?"},
		{"think tags", v, "<think>\nLet me see.\n</think>\n\n{\"score\": 3, \"reason\": \"r\"}", "--reasoning-parser"},
		{"code block", v, "```json\n{\"score\": 3, \"reason\": \"r\"}\n```", "Markdown code block"},
		{"two values", v, `{"score": 3, "reason": "r"} {}`, "not JSON"},
		{"empty", v, "", "the content is empty"},
		{"json_object: an object", obj, `{"a": [1, {"b": null}]}`, ""},
		{"json_object: an array", obj, `[1]`, "one JSON object, not an array"},
		{"json_object: a string", obj, `"x"`, "not a string"},
		{"json_object: not JSON", obj, `{"a": }`, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.Check(tt.content)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("valid content refused: %v", err)
				}
				return
			}
			var inv *Invalid
			if !errors.As(err, &inv) {
				t.Fatalf("Check = %v, want an *Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if tt.content != "" && !strings.Contains(err.Error(), "it began: "+bound(tt.content, StartBytes)) {
				t.Errorf("error %q does not give the answer's start", err)
			}
		})
	}
}

// TestInvalidIsBounded: an answer of any length keeps at most StartBytes
// of itself, cut on a character boundary, and its length; a schema that
// fails in many places keeps a bounded message.
func TestInvalidIsBounded(t *testing.T) {
	v := compile(t, `{"type":"array","items":{"type":"integer"}}`)
	long := "[" + strings.Repeat(`"ééé",`, 2000) + `"é"]`
	err := v.Check(long)
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("Check = %v", err)
	}
	if len(inv.Start) > StartBytes || !utf8.ValidString(inv.Start) || !strings.HasPrefix(long, inv.Start) {
		t.Errorf("start %d bytes, valid UTF-8 %v", len(inv.Start), utf8.ValidString(inv.Start))
	}
	if len(inv.Reason) > reasonBytes || !utf8.ValidString(inv.Reason) {
		t.Errorf("reason %d bytes: %s", len(inv.Reason), inv.Reason)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("... (%d bytes)", len(long))) || !strings.Contains(inv.Reason, "; and 1996 more") {
		t.Errorf("error %q does not give the answer's length", err)
	}
}

// TestCompileErrors: a schema that is not one, or names another document,
// is refused with what is wrong, never the validator's internal URL.
func TestCompileErrors(t *testing.T) {
	tests := map[string]struct{ schema, want string }{
		"unknown type":         {`{"type":"objekt"}`, "the schema is not a valid JSON Schema: at '/type'"},
		"minimum not a number": {`{"type":"integer","minimum":"1"}`, "at '/minimum': got string, want number"},
		"bad pattern":          {`{"type":"string","pattern":"(?<=a)b"}`, "pattern"},
		"another document":     {`{"$ref":"other.json"}`, "put what it names in the schema's $defs"},
		"a missing $defs":      {`{"$ref":"#/$defs/nope"}`, "nope"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(job.ResponseFormat{Type: job.FormatJSONSchema, Name: "x", Schema: json.RawMessage(tt.schema)})
			if err == nil {
				t.Fatal("compiled")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "mem://") {
				t.Errorf("error %q: want it to say %q, and no internal URL", err, tt.want)
			}
		})
	}
	if v, err := Compile(job.ResponseFormat{}); v != nil || err != nil {
		t.Errorf("no format: %v, %v; want nil, nil", v, err)
	}
	// A local reference works: pydantic's schemas are made of them.
	v := compile(t, `{"$defs":{"S":{"type":"integer"}},"type":"object","properties":{"s":{"$ref":"#/$defs/S"}},"required":["s"]}`)
	if err := v.Check(`{"s":1}`); err != nil {
		t.Error(err)
	}
	if err := v.Check(`{"s":"1"}`); err == nil {
		t.Error("a $defs type was not checked")
	}
}

// FuzzCheck: hostile content never panics the validator, an error is
// always an *Invalid bounded in size, and what passes is one JSON value
// (for json_object, one object).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"score":8,"reason":"x"}`, `{"score":"8"}`, `[`, `{"a":` + strings.Repeat("[", 5000), "\xff\xfe", `1e999999`, `{"score":1e400,"reason":""}`, `"\ud800"`, "<think>x</think>{}"} {
		f.Add(s)
	}
	v := compile(f, judge)
	obj, _ := Compile(job.ResponseFormat{Type: job.FormatJSONObject})
	f.Fuzz(func(t *testing.T, content string) {
		for _, val := range []*Validator{v, obj} {
			err := val.Check(content)
			if err == nil {
				var x any
				dec := json.NewDecoder(bytes.NewReader([]byte(content)))
				dec.UseNumber()
				if !json.Valid([]byte(content)) || dec.Decode(&x) != nil {
					t.Fatalf("passed, but is not one JSON value: %q", content)
				}
				if _, isObj := x.(map[string]any); !isObj {
					t.Fatalf("passed, but is no object: %q", content)
				}
				continue
			}
			var inv *Invalid
			if !errors.As(err, &inv) || len(inv.Start) > StartBytes || len(inv.Reason) > reasonBytes {
				t.Fatalf("error %T %v", err, err)
			}
		}
	})
}

// BenchmarkCheck is the check of one judge verdict, per answer.
func BenchmarkCheck(b *testing.B) {
	v := compile(b, judge)
	content := `{"score": 8, "reason": "The answer is correct and gives its steps; one of them could be shorter.", "tags": ["short"]}`
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Check(content); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCompileBounds: a schema past MaxSchemaBytes or nested past
// MaxSchemaDepth is refused at once, saying which bound; brackets inside
// strings are no nesting, and a schema within both bounds compiles.
func TestCompileBounds(t *testing.T) {
	nested := func(levels int) []byte {
		var b strings.Builder
		for range levels {
			b.WriteString(`{"type":"array","items":`)
		}
		b.WriteString(`{"type":"string"}`)
		b.WriteString(strings.Repeat("}", levels))
		return []byte(b.String())
	}
	big := []byte(`{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`)
	for _, tc := range []struct {
		name   string
		schema []byte
		want   string // "": compiles
	}{
		{"too big", big, "more than the 262144 allowed"},
		{"too deep", nested(3000), "more than 128 deep"},
		{"deep in strings only", []byte(`{"description":"` + strings.Repeat(`[{\"`, 500) + `"}`), ""},
		{"within", nested(MaxSchemaDepth - 1), ""},
	} {
		_, err := Compile(job.ResponseFormat{Type: job.FormatJSONSchema, Schema: tc.schema})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it compiled", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
