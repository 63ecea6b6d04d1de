package mockserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// everySchema uses every kind of value the mock draws: an object with
// required and optional keys, strings (enum, lengths, a format), an
// integer and a number with bounds, a boolean, null in a type list, an
// array of nested objects, a $ref to $defs, anyOf and allOf.
const everySchema = `{
  "type": "object",
  "properties": {
    "score": {"type": "integer", "minimum": 1, "maximum": 10},
    "confidence": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "verdict": {"enum": ["keep", "drop", "fix"]},
    "reason": {"type": "string", "minLength": 3, "maxLength": 40},
    "when": {"type": "string", "format": "date"},
    "ok": {"type": "boolean"},
    "note": {"type": ["string", "null"]},
    "steps": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"$ref": "#/$defs/step"}},
    "tag": {"anyOf": [{"type": "integer", "minimum": 100}, {"const": "none"}]},
    "meta": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                       {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}
  },
  "required": ["score", "confidence", "verdict", "reason", "ok", "steps", "meta"],
  "additionalProperties": false,
  "$defs": {
    "step": {"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}, "text": {"type": "string"}},
             "required": ["n", "text"], "additionalProperties": false}
  }
}`

func compileSchema(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// validFor reports why content is not valid for sch, or "".
func validFor(sch *jsonschema.Schema, content string) string {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	if err := sch.Validate(v); err != nil {
		return err.Error()
	}
	return ""
}

func withSchema(prompt, schema string) map[string]any {
	return map[string]any{
		"model": DefaultModel, "messages": userMessages(prompt), "max_tokens": 4096,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": json.RawMessage(schema), "strict": true}},
	}
}

// TestShapedAnswers: asked for a schema, every answer's content is valid
// for it, plain and streamed alike, the same for the same prompt; the
// reasoning comes before it as ever.
func TestShapedAnswers(t *testing.T) {
	_, ts := start(t, Options{Seed: 5, MeanTokens: 40})
	sch := compileSchema(t, everySchema)
	seen := map[string]bool{}
	for i := range 60 {
		body := withSchema(fmt.Sprintf("question %d", i), everySchema)
		p, _ := plain(t, ts.URL, body)
		s := stream(t, ts.URL, body, FieldReasoning, true)
		if why := validFor(sch, p.Content); why != "" {
			t.Fatalf("prompt %d: plain content %s: %s", i, p.Content, why)
		}
		if s.Content != p.Content || s.Reasoning != p.Reasoning || s.Finish != "stop" || p.Finish != "stop" {
			t.Fatalf("prompt %d: streamed %+v, plain %+v: want the same answer", i, s, p)
		}
		if p.Reasoning == "" || strings.HasPrefix(p.Reasoning, "{") {
			t.Errorf("prompt %d: reasoning %q, want the thought before the JSON", i, p.Reasoning)
		}
		if p.Completion < 2 {
			t.Errorf("prompt %d: %d completion tokens", i, p.Completion)
		}
		seen[p.Content] = true
	}
	if len(seen) < 50 {
		t.Errorf("%d distinct answers to 60 prompts: the JSON does not depend on the prompt", len(seen))
	}
}

// TestShapeSources: json_object gives an object; older vLLM's guided_json
// (an object or a string) and newer vLLM's structured_outputs.json are
// read as response_format's schema; text asks for nothing.
func TestShapeSources(t *testing.T) {
	_, ts := start(t, Options{Seed: 1, MeanTokens: 30})
	schema := `{"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":3}},"required":["n"]}`
	base := func() map[string]any {
		return map[string]any{"model": DefaultModel, "messages": userMessages("q"), "max_tokens": 1000}
	}
	cases := map[string]func(b map[string]any){
		"guided_json object":      func(b map[string]any) { b["guided_json"] = json.RawMessage(schema) },
		"guided_json string":      func(b map[string]any) { b["guided_json"] = schema },
		"structured_outputs.json": func(b map[string]any) { b["structured_outputs"] = map[string]any{"json": json.RawMessage(schema)} },
	}
	for name, set := range cases {
		b := base()
		set(b)
		if a, _ := plain(t, ts.URL, b); a.Content != `{"n":3}` {
			t.Errorf("%s: content %q, want {\"n\":3}", name, a.Content)
		}
	}
	b := base()
	b["response_format"] = map[string]any{"type": "json_object"}
	a, _ := plain(t, ts.URL, b)
	var obj map[string]any
	if err := json.Unmarshal([]byte(a.Content), &obj); err != nil {
		t.Errorf("json_object: content %q is no object: %v", a.Content, err)
	}
	b = base()
	b["response_format"] = map[string]any{"type": "text"}
	if a, _ := plain(t, ts.URL, b); strings.HasPrefix(a.Content, "{") {
		t.Errorf("text: content %q", a.Content)
	}
}

// TestShapeBadRequests: a response_format a server cannot read is its 400.
func TestShapeBadRequests(t *testing.T) {
	_, ts := start(t, Options{})
	for body, want := range map[string]string{
		`{"type":"xml"}`:         `response_format.type: \"xml\" is not one of`,
		`{"type":"json_schema"}`: "response_format.json_schema.schema: field required",
		`{"type":"json_schema","json_schema":{"schema":[1]}}`: "must be a JSON Schema object",
	} {
		resp := post(t, t.Context(), ts.URL, map[string]any{"model": DefaultModel, "messages": userMessages("q"), "response_format": json.RawMessage(body)})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, resp.StatusCode, b, want)
		}
	}
}

// TestShapedAnswerCut: an answer whose thought and JSON do not fit in
// max_tokens is cut there (finish_reason length), its JSON unfinished.
func TestShapedAnswerCut(t *testing.T) {
	_, ts := start(t, Options{Seed: 2, MeanTokens: 20})
	body := withSchema("q", everySchema)
	body["max_tokens"] = 25
	a, _ := plain(t, ts.URL, body)
	if a.Finish != "length" || a.Completion != 25 || json.Valid([]byte(a.Content)) {
		t.Errorf("answer %+v: want cut at 25 tokens, its content no JSON", a)
	}
}

// TestShapedAnswerNoParser: a server without a reasoning parser puts the
// thought in think tags before the JSON, in the content, plain and
// streamed alike: no JSON.
func TestShapedAnswerNoParser(t *testing.T) {
	_, ts := start(t, Options{Seed: 3, MeanTokens: 30, ReasoningField: FieldNone})
	sch := compileSchema(t, everySchema)
	body := withSchema("q", everySchema)
	p, _ := plain(t, ts.URL, body)
	s := stream(t, ts.URL, body, FieldNone, false)
	if p.Content != s.Content || !strings.HasPrefix(p.Content, thinkOpen) {
		t.Fatalf("plain %q, streamed %q: want the same, in think tags first", p.Content, s.Content)
	}
	_, after, ok := strings.Cut(p.Content, thinkClose)
	if !ok || validFor(sch, after) != "" {
		t.Errorf("after the think tags %q: want JSON valid for the schema (%s)", after, validFor(sch, after))
	}
}

// TestRateInvalidJSON: a share of the shaped answers is not valid for
// the schema (cut, a required key missing, a wrong type), as many as the
// mock counts; which arrivals is the same for the same seed, and a retry
// of the same prompt is a new draw.
func TestRateInvalidJSON(t *testing.T) {
	const n = 400
	sch := compileSchema(t, everySchema)
	run := func(seed int64) ([]bool, Stats, map[string]int) {
		s, ts := start(t, Options{Seed: seed, MeanTokens: 20, RateInvalidJSON: 0.2})
		bad := make([]bool, n)
		how := map[string]int{}
		for i := range n {
			a, _ := plain(t, ts.URL, withSchema(fmt.Sprintf("q%d", i%50), everySchema))
			if why := validFor(sch, a.Content); why != "" {
				bad[i] = true
				switch {
				case strings.HasPrefix(why, "not JSON"):
					how["cut"]++
				case strings.Contains(why, "missing propert"):
					how["missing"]++
				default:
					how["type"]++
				}
			}
		}
		return bad, s.Stats(), how
	}
	bad, st, how := run(9)
	count := 0
	for _, b := range bad {
		if b {
			count++
		}
	}
	if int64(count) != st.InvalidJSON {
		t.Errorf("%d answers not valid, the mock counts %d", count, st.InvalidJSON)
	}
	if count < n/10 || count > n*3/10 {
		t.Errorf("%d of %d not valid, want about 20%%", count, n)
	}
	if how["cut"] == 0 || how["missing"] == 0 || how["type"] == 0 {
		t.Errorf("ways answers were spoilt: %v, want each of cut, missing and type", how)
	}
	again, _, _ := run(9)
	other, _, _ := run(10)
	same, differ := true, false
	for i := range bad {
		same = same && bad[i] == again[i]
		differ = differ || bad[i] != other[i]
	}
	if !same || !differ {
		t.Errorf("same seed same arrivals %v, another seed others %v: want both", same, differ)
	}
	if err := (Options{RateInvalidJSON: 1.5}).Validate(); err == nil {
		t.Error("a rate of 1.5 is accepted")
	}
}
