// Package shape checks an answer's content against the job's
// generation.response_format: one JSON object (json_object), or a value
// valid for a JSON Schema (json_schema), validated by
// santhosh-tekuri/jsonschema (drafts 4 to 2020-12). The pool asks an answer
// that is not in the shape again (cause "schema"); cmd compiles the schema
// at start, so a schema that does not compile is a config error.
//
// Only the content is checked: a reasoning model's reasoning is free text
// before it. A server without a reasoning parser puts that thought in the
// content, inside <think> tags, which no JSON is: such an answer is invalid,
// and the error says why.
package shape

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/synthgen/synthgen/job"
)

// Cause is the cause of an answer not in the shape asked, in the retries
// by cause and in errors/.
const Cause = "schema"

// StartBytes bounds the start of an invalid answer that its error keeps.
const StartBytes = 200

// reasonBytes bounds the validator's message an error keeps: a schema
// with many properties can fail in as many places.
const reasonBytes = 600

// maxLeaves is how many of a validation's failures its message lists.
const maxLeaves = 5

// schemaURL is the schema's name for the validator: not a file, so that
// a $ref to another document is refused by refuseLoader rather than read.
const (
	schemaBase = "mem://response_format/"
	schemaURL  = schemaBase + "schema.json"
)

// MaxSchemaBytes and MaxSchemaDepth bound the schema Compile takes: the
// compiler's time grows past linear with either (a 5.5 MB schema took 96 s,
// one 3000 levels deep more than 120 s, neither stoppable), and a schema a
// server can enforce is far smaller and shallower.
const (
	MaxSchemaBytes = 256 << 10 // 0.3 s to compile on a loaded 2-core box; 1 MiB took 7.7 s
	MaxSchemaDepth = 128
)

// checkBounds refuses a schema past MaxSchemaBytes or nested (objects and
// arrays) deeper than MaxSchemaDepth, before any parse.
func checkBounds(schema []byte) error {
	if len(schema) > MaxSchemaBytes {
		return fmt.Errorf("the schema is %d bytes, more than the %d allowed (MaxSchemaBytes): a schema a server enforces is far smaller", len(schema), MaxSchemaBytes)
	}
	depth, in, esc := 0, false, false
	for _, c := range schema {
		switch {
		case esc:
			esc = false
		case in:
			esc, in = c == '\\', c != '"'
		case c == '"':
			in = true
		case c == '{' || c == '[':
			if depth++; depth > MaxSchemaDepth {
				return fmt.Errorf("the schema nests objects and arrays more than %d deep (MaxSchemaDepth)", MaxSchemaDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// Validator checks answers against one ResponseFormat. It holds no state
// that a check changes: one Validator serves every slot at once.
type Validator struct {
	format job.ResponseFormat
	schema *jsonschema.Schema // nil for json_object
}

// Compile makes the Validator of f; nil (and no error) when f asks for no
// shape. Its error says what in the schema is wrong.
func Compile(f job.ResponseFormat) (*Validator, error) {
	switch f.Type {
	case "":
		return nil, nil
	case job.FormatJSONObject:
		return &Validator{format: f}, nil
	case job.FormatJSONSchema:
	default:
		return nil, fmt.Errorf("response format type %q: want %s or %s", f.Type, job.FormatJSONObject, job.FormatJSONSchema)
	}
	if err := checkBounds(f.Schema); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.Schema))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("the schema must be a JSON object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, compileError(err)
	}
	return &Validator{format: f, schema: sch}, nil
}

// refuseLoader loads no document: a schema is sent to the server whole, and
// a server resolves no reference to a file or URL of ours.
type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) {
	return nil, errors.New("a $ref to another document is not followed: put what it names in the schema's $defs and refer to #/$defs/NAME")
}

// compileError is the compiler's error without the schema's internal URL.
func compileError(err error) error {
	var (
		se *jsonschema.SchemaValidationError
		ve *jsonschema.ValidationError
	)
	if errors.As(err, &se) && errors.As(se.Err, &ve) {
		return fmt.Errorf("the schema is not a valid JSON Schema: %s", describe(ve))
	}
	msg := strings.ReplaceAll(err.Error(), schemaURL, "the schema")
	return errors.New(strings.ReplaceAll(msg, schemaBase, ""))
}

// Invalid is an answer whose content is not in the shape asked.
type Invalid struct {
	Reason string // what the validator says, bounded
	Start  string // the content's first bytes, at most StartBytes
	Length int    // the content's length in bytes
}

func (e *Invalid) Error() string {
	s := "the content is not valid for generation.response_format: " + e.Reason
	if e.Length == 0 {
		return s + " (the content is empty)"
	}
	s += "; it began: " + e.Start
	if e.Length > len(e.Start) {
		s += fmt.Sprintf("... (%d bytes)", e.Length)
	}
	return s
}

// Check returns nil when content is in the shape, else an *Invalid. It
// reads content only: the caller passes the answer's content, never its
// reasoning.
func (v *Validator) Check(content string) error {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return v.invalid(content, notJSON(content, err))
	}
	if v.schema == nil {
		if _, ok := doc.(map[string]any); !ok {
			return v.invalid(content, fmt.Sprintf("json_object asks for one JSON object, not %s", kindOf(doc)))
		}
		return nil
	}
	if err := v.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return v.invalid(content, describe(ve))
		}
		return v.invalid(content, err.Error())
	}
	return nil
}

func (v *Validator) invalid(content, reason string) *Invalid {
	return &Invalid{Reason: bound(reason, reasonBytes), Start: bound(content, StartBytes), Length: len(content)}
}

// notJSON says why content is no JSON value, with what a person can do
// about the usual reasons: a thought in think tags (a server without a
// reasoning parser), a Markdown code block, an answer cut short.
func notJSON(content string, err error) string {
	trimmed := strings.TrimSpace(content)
	switch {
	case trimmed == "":
		return "not JSON: no value"
	case strings.HasPrefix(trimmed, "<think>"):
		return "not JSON: the content starts with <think>: the server sent the model's reasoning in the content " +
			"(no reasoning parser); start it with one (vLLM, SGLang: --reasoning-parser) so that only the answer is the content"
	case strings.HasPrefix(trimmed, "```"):
		return "not JSON: the content is a Markdown code block (```); a server that enforces response_format never writes one"
	}
	msg := err.Error()
	if strings.Contains(msg, "unexpected EOF") {
		msg += " (the JSON stops before its end: an answer cut at max_tokens?)"
	}
	return "not JSON: " + msg
}

// describe writes a validation error as its leaves: "at '/score': got
// string, want integer; at ”: missing property 'reason'".
func describe(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			// A leaf writes itself as "at '/score': got string, want integer".
			leaves = append(leaves, e.Error())
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) > maxLeaves {
		leaves = append(leaves[:maxLeaves], fmt.Sprintf("and %d more", len(leaves)-maxLeaves))
	}
	return strings.Join(leaves, "; ")
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// bound cuts s to at most n bytes on a character boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
