package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// ResponseFormat is generation.response_format: the shape every answer's
// content must have, sent as OpenAI's response_format. The zero value asks
// for none.
type ResponseFormat struct {
	// Type is FormatJSONObject, FormatJSONSchema, or "" for none.
	Type string `json:"type"`
	// Name is json_schema's name (OpenAI requires one).
	Name string `json:"name,omitempty"`
	// Schema is json_schema's JSON Schema: its content (never the file it
	// was read from), compact, its keys in the order written, since a
	// server's grammar generates properties in that order.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Strict is json_schema's strict.
	Strict bool `json:"strict,omitempty"`
}

// The values of ResponseFormat.Type.
const (
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Set reports whether a shape is asked for.
func (f ResponseFormat) Set() bool { return f.Type != "" }

// Identity is the value hashed and compared: the type, and for a schema its
// name, strictness and content. Encoders differ in what they escape (the
// manifest's encoding/json writes < as \u003c), so the schema is compared
// compacted with HTML escaping, which both spellings reach.
func (f ResponseFormat) Identity() string {
	switch f.Type {
	case "":
		return "none"
	case FormatJSONSchema:
		return f.Type + " name=" + strconv.Quote(f.Name) + " strict=" + strconv.FormatBool(f.Strict) + " schema=" + string(canonicalSchema(f.Schema))
	}
	return f.Type
}

// String is the format as a person reads it in a refused resume: a schema
// by its name, the start of its text and a short hash of its content.
func (f ResponseFormat) String() string {
	if f.Type != FormatJSONSchema {
		return f.Identity()
	}
	canon := canonicalSchema(f.Schema)
	sum := sha256.Sum256(canon)
	start := string(f.Schema)
	if len(start) > 48 {
		start = start[:48] + "..."
	}
	return fmt.Sprintf("json_schema %q %s (sha256 %s)", f.Name, start, hex.EncodeToString(sum[:6]))
}

// canonicalSchema is a schema compacted, <, > and & escaped; the text as
// is when it is not JSON (a job made by hand).
func canonicalSchema(b []byte) []byte {
	var c, out bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return b
	}
	json.HTMLEscape(&out, c.Bytes())
	return out.Bytes()
}
