package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/job"
)

// judgeSchema is a schema whose keys are not in sorted order: a server's
// grammar writes properties in the order the schema gives, so the order
// must reach it as written.
const judgeSchema = `{"type":"object","properties":{"score":{"type":"integer","minimum":1,"maximum":10},"reason":{"type":"string"}},"required":["score","reason"]}`

// TestResponseFormatFromEverySource: an inline schema keeps its keys in
// the order written from a YAML or JSON file, a flag and the environment
// (TOML keeps no order: sorted); @FILE reads the file's content; OpenAI's
// own response_format object is taken apart; json_object is itself.
func TestResponseFormatFromEverySource(t *testing.T) {
	schemaFile := writeFile(t, "judge.schema.json", "{\n  \"title\": \"Judge verdict\",\n  \"type\": \"object\",\n  \"properties\": {\"score\": {\"type\": \"integer\"}}\n}\n")
	tests := []struct {
		name       string
		file, body string // a config file's name and text; "" for none
		env, flag  string // generation.response_format from the environment or a flag
		want       ResponseFormat
	}{
		{name: "yaml mapping", file: "c.yaml", body: `
generation:
  response_format:
    type: object
    properties:
      score: {type: integer, minimum: 1, maximum: 10}
      reason: {type: string}
    required: [score, reason]
`, want: ResponseFormat{Type: job.FormatJSONSchema, Name: "response", Schema: []byte(judgeSchema), Strict: true}},
		{name: "json object", file: "c.json", body: `{"generation": {"response_format": ` + judgeSchema + `}}`,
			want: ResponseFormat{Type: job.FormatJSONSchema, Name: "response", Schema: []byte(judgeSchema), Strict: true}},
		{name: "toml table, sorted", file: "c.toml", body: "[generation.response_format]\ntype = \"object\"\nrequired = [\"a\"]\n",
			want: ResponseFormat{Type: job.FormatJSONSchema, Name: "response", Schema: []byte(`{"required":["a"],"type":"object"}`), Strict: true}},
		{name: "flag", flag: judgeSchema,
			want: ResponseFormat{Value: judgeSchema, Type: job.FormatJSONSchema, Name: "response", Schema: []byte(judgeSchema), Strict: true}},
		{name: "env, spaced", env: " { \"type\" : \"object\" } ",
			want: ResponseFormat{Value: `{ "type" : "object" }`, Type: job.FormatJSONSchema, Name: "response", Schema: []byte(`{"type":"object"}`), Strict: true}},
		{name: "file, named by its title", flag: "@" + schemaFile,
			want: ResponseFormat{Value: "@" + schemaFile, File: schemaFile, Type: job.FormatJSONSchema, Name: "Judge_verdict",
				Schema: []byte(`{"title":"Judge verdict","type":"object","properties":{"score":{"type":"integer"}}}`), Strict: true}},
		{name: "json_object", file: "c.yaml", body: "generation:\n  response_format: json_object\n",
			want: ResponseFormat{Value: "json_object", Type: job.FormatJSONObject}},
		{name: "OpenAI's json_object", flag: `{"type":"json_object"}`,
			want: ResponseFormat{Value: `{"type":"json_object"}`, Type: job.FormatJSONObject}},
		{name: "OpenAI's json_schema", file: "c.yaml", body: `
generation:
  response_format:
    type: json_schema
    json_schema:
      name: verdict
      strict: false
      schema: {type: object, properties: {ok: {type: boolean}}}
`, want: ResponseFormat{Type: job.FormatJSONSchema, Name: "verdict", Schema: []byte(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)}},
		{name: "none", file: "c.yaml", body: "generation:\n  response_format:\n", want: ResponseFormat{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv(EnvName(responseFormatKey), tt.env)
			}
			var args []string
			if tt.flag != "" {
				args = []string{"--" + responseFormatKey, tt.flag}
			}
			file := ""
			if tt.file != "" {
				file = writeFile(t, tt.file, tt.body)
			}
			c, err := Load(cmdFlags(t, args...), file)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Generation.ResponseFormat
			if tt.file != "" && tt.want.Value == "" {
				tt.want.Value = got.Value // the text the file check made: compared through Schema
			}
			if got.Type != tt.want.Type || got.Name != tt.want.Name || string(got.Schema) != string(tt.want.Schema) ||
				got.Strict != tt.want.Strict || got.File != tt.want.File || got.Value != tt.want.Value {
				t.Errorf("got %+v (schema %s)\nwant %+v (schema %s)", got, got.Schema, tt.want, tt.want.Schema)
			}
			if r := c.Redacted()["generation"].(map[string]any)["response_format"]; r != got.Value {
				t.Errorf("the manifest's config says %v, the key %q", r, got.Value)
			}
		})
	}
}

// TestResponseFormatErrors: a value that is no format, or a file that is
// missing or holds no object, is refused naming where it was set and the
// key; a negative schema_retries and a shape asked twice are refused too.
func TestResponseFormatErrors(t *testing.T) {
	dir := t.TempDir()
	notObject := filepath.Join(dir, "list.json")
	if err := os.WriteFile(notObject, []byte("[1, 2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte("{\n  \"type\": \"object\",\n  \"properties\": {\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent.json")
	tests := []struct {
		name      string
		file      string // yaml body
		args      []string
		want      string // CFG stands for the config file's path
		fileCheck bool   // refused by the file's check, before any value is read
	}{
		{name: "a word", file: "generation:\n  response_format: json\n",
			want: `CFG:2: generation.response_format: "json" is not json_object, a JSON Schema (an object: a mapping in the file, '{...}' in a flag or the environment) or @FILE holding one`},
		{name: "a list", file: "generation:\n  response_format: [a]\n",
			want: `CFG:2: generation.response_format: must be json_object, @FILE or a mapping (a JSON Schema), not a list`, fileCheck: true},
		{name: "no file named", args: []string{"--generation.response_format", "@"},
			want: `flag --generation.response_format: generation.response_format: "@" names no file: write @path/to/schema.json`},
		{name: "missing file", file: "generation:\n  response_format: \"@" + missing + "\"\n",
			want: `CFG:2: generation.response_format: read the schema file: open ` + missing + `: no such file or directory`},
		{name: "file not an object", args: []string{"--generation.response_format", "@" + notObject},
			want: `flag --generation.response_format: generation.response_format: schema file ` + notObject + `: must be a JSON object, not [`},
		{name: "file not JSON", args: []string{"--generation.response_format", "@" + broken},
			want: `flag --generation.response_format: generation.response_format: schema file ` + broken + `: not JSON: unexpected EOF`},
		{name: "data after the object", args: []string{"--generation.response_format", `{"type":"object"} {}`},
			want: `flag --generation.response_format: generation.response_format: line 1: data after the closing brace`},
		{name: "OpenAI form without a schema", args: []string{"--generation.response_format", `{"type":"json_schema"}`},
			want: `flag --generation.response_format: generation.response_format: "type": "json_schema" without "json_schema": {"name": ..., "schema": {...}}`},
		{name: "OpenAI form with a bad name", args: []string{"--generation.response_format", `{"type":"json_schema","json_schema":{"name":"a b","schema":{}}}`},
			want: `flag --generation.response_format: generation.response_format: json_schema: name "a b": OpenAI allows 1 to 64 letters, digits, _ and -`},
		{name: "negative retries", file: "generation:\n  schema_retries: -1\n",
			want: `CFG:2: generation.schema_retries: -1 is less than 0`},
		{name: "a shape in extra_body too", file: "generation:\n  response_format: json_object\n  extra_body:\n    guided_json: {type: object}\n",
			want: `CFG:3: generation.extra_body: "guided_json" asks for a shape of its own, and generation.response_format is set: keep one (the answers are checked against generation.response_format)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = writeFile(t, "my.yaml", tt.file)
			}
			_, err := Load(cmdFlags(t, tt.args...), file)
			if err == nil {
				t.Fatal("no error")
			}
			if want := strings.ReplaceAll(tt.want, "CFG", file); err.Error() != want {
				t.Errorf("error\n%s\nwant\n%s", err, want)
			}
			var fe *FieldError
			if !tt.fileCheck && !errors.As(err, &fe) {
				t.Errorf("%v holds no *FieldError", err)
			}
		})
	}
}
