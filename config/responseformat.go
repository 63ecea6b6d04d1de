package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/synthgen/synthgen/job"
)

// responseFormatKey may hold a mapping in a file (a JSON Schema written
// inline): the file check turns it into its JSON text, keys in the order
// written, before viper sees it.
const responseFormatKey = "generation.response_format"

// DefaultSchemaRetries is generation.schema_retries' default: an answer
// not in the shape asked is asked twice more before it is an error.
const DefaultSchemaRetries = 2

// DefaultSchemaName is json_schema's name when neither the OpenAI form's
// name nor the schema's title gives one.
const DefaultSchemaName = "response"

// ResponseFormat is generation.response_format: the shape every answer's
// content must have. It is read from "json_object", "@path" (a file
// holding a JSON Schema, or OpenAI's response_format object), or a JSON
// object written inline (the same two forms); the zero value asks for
// none.
type ResponseFormat struct {
	// Value is the key as written (an inline object as its JSON text).
	Value string
	// File is the schema file Value names (@path), as written; "" when
	// inline. The schema's content, not this path, is the job's.
	File string
	// Type is job.FormatJSONObject, job.FormatJSONSchema (the job's one
	// definition of OpenAI's names), or "" for none.
	Type string
	// Name, Schema and Strict are json_schema's: Schema is compact, its
	// keys in the order written.
	Name   string
	Schema json.RawMessage
	Strict bool
}

// Set reports whether a shape is asked for.
func (f ResponseFormat) Set() bool { return f.Type != "" }

// ParseResponseFormat reads generation.response_format's value, reading
// the file an @path names (relative to the current directory, as
// dataset.path is). Its errors say what is wrong with the value or the
// file; the schema's own keywords are checked when it is compiled
// (generator/shape), not here.
func ParseResponseFormat(s string) (ResponseFormat, error) {
	s = strings.TrimSpace(s)
	f := ResponseFormat{Value: s}
	switch {
	case s == "":
		return f, nil
	case s == job.FormatJSONObject:
		f.Type = job.FormatJSONObject
		return f, nil
	case strings.HasPrefix(s, "@"):
		f.File = strings.TrimSpace(s[1:])
		if f.File == "" {
			return f, errors.New(`"@" names no file: write @path/to/schema.json`)
		}
		b, err := os.ReadFile(f.File)
		if err != nil {
			return f, fmt.Errorf("read the schema file: %w", err)
		}
		if err := f.object(b); err != nil {
			return f, fmt.Errorf("schema file %s: %w", f.File, err)
		}
		return f, nil
	case strings.HasPrefix(s, "{"):
		return f, f.object([]byte(s))
	}
	return f, fmt.Errorf("%q is not json_object, a JSON Schema (an object: a mapping in the file, '{...}' in a flag or the environment) or @FILE holding one", s)
}

// object reads b as one JSON object: OpenAI's response_format
// ({"type":"json_schema","json_schema":{"name","schema","strict"}} or
// {"type":"json_object"}), else a JSON Schema itself.
func (f *ResponseFormat) object(b []byte) error {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a BOM some editors write
	if err := oneObject(b); err != nil {
		return err
	}
	var outer struct {
		Type       *string         `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	_ = json.Unmarshal(b, &outer) // a schema's "type" may be a list: then it is no OpenAI form
	switch {
	case outer.Type != nil && *outer.Type == job.FormatJSONObject && len(keys) == 1:
		f.Type = job.FormatJSONObject
		return nil
	case outer.Type != nil && *outer.Type == job.FormatJSONSchema:
		if len(outer.JSONSchema) == 0 {
			return errors.New(`"type": "json_schema" without "json_schema": {"name": ..., "schema": {...}}`)
		}
		var inner struct {
			Name   *string         `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		}
		if err := json.Unmarshal(outer.JSONSchema, &inner); err != nil {
			return fmt.Errorf("json_schema: %w", err)
		}
		if oneObject(inner.Schema) != nil {
			return errors.New(`json_schema: "schema" must be a JSON Schema object`)
		}
		f.Type, f.Strict = job.FormatJSONSchema, inner.Strict == nil || *inner.Strict
		if inner.Name != nil {
			if !schemaNameRE.MatchString(*inner.Name) {
				return fmt.Errorf("json_schema: name %q: OpenAI allows 1 to 64 letters, digits, _ and -", *inner.Name)
			}
			f.Name = *inner.Name
		} else {
			f.Name = schemaName(inner.Schema)
		}
		f.Schema = compact(inner.Schema)
		return nil
	}
	f.Type, f.Strict = job.FormatJSONSchema, true
	f.Name = schemaName(b)
	f.Schema = compact(b)
	return nil
}

// oneObject checks that b is exactly one JSON object.
func oneObject(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", jsonErrorAt(b, err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("must be a JSON object, not %v", tok)
	}
	dec = json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", jsonErrorAt(b, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		line, _ := lineCol(b, dec.InputOffset())
		return fmt.Errorf("line %d: data after the closing brace", line)
	}
	return nil
}

func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b) // oneObject has already read it as JSON
	}
	return buf.Bytes()
}

// schemaNameRE is what OpenAI allows as json_schema's name.
var schemaNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// schemaName is json_schema's name for a schema: its title when that is a
// valid name with spaces as _, else DefaultSchemaName.
func schemaName(schema []byte) string {
	var s struct {
		Title string `json:"title"`
	}
	_ = json.Unmarshal(schema, &s)
	if t := strings.ReplaceAll(strings.TrimSpace(s.Title), " ", "_"); schemaNameRE.MatchString(t) {
		return t
	}
	return DefaultSchemaName
}

// String is the key's value as written.
func (f ResponseFormat) String() string { return f.Value }

// assign reads raw: a string from a flag, the environment or the file (an
// inline mapping was turned into its JSON text by the file check).
func (f *ResponseFormat) assign(raw any) error {
	s, err := toString(raw)
	if err != nil {
		return fmt.Errorf("%v; write json_object, @FILE or a JSON Schema", err)
	}
	parsed, err := ParseResponseFormat(s)
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}
