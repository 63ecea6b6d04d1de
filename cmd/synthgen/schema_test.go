package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// judgeSchema is the second pass's verdict.
const judgeSchema = `{
  "type": "object",
  "properties": {
    "score": {"type": "integer", "minimum": 1, "maximum": 10},
    "reason": {"type": "string"}
  },
  "required": ["score", "reason"],
  "additionalProperties": false
}`

func writeText(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// schemaMock is a mock whose answers to a request asking for a shape are
// not valid for it at rate; a request whose prompt is ignore has its
// response_format taken away on the way in (a server that ignores it), so
// that prompt is answered out of shape every time.
func schemaMock(t *testing.T, opts mockserver.Options, ignore string) (*mockserver.Server, string) {
	t.Helper()
	m := mockserver.New(opts)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && ignore != "" {
			body, _ := io.ReadAll(r.Body)
			var req map[string]json.RawMessage
			if json.Unmarshal(body, &req) == nil && bytes.Contains(req["messages"], []byte(`"`+ignore+`"`)) {
				delete(req, "response_format")
				body, _ = json.Marshal(req)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		m.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return m, ts.URL + "/v1"
}

// TestRunSchemaWithInvalidAnswers: against a server one answer in five of
// which is out of shape, every recorded answer validates against the
// schema, the retries by cause say schema, and a prompt answered out of
// shape on every attempt is in errors/ with the validator's message; the
// run exits 3 (failed for good). Every out-of-shape answer the mock made
// is one schema retry or the last attempt of an error.
func TestRunSchemaWithInvalidAnswers(t *testing.T) {
	m, url := schemaMock(t, mockserver.Options{MeanTokens: 16, Seed: 11, RateInvalidJSON: 0.2}, "question 7")
	schemaFile := writeText(t, "judge.schema.json", judgeSchema)
	cj := cliJob{baseURL: url, data: cliDataset(t, 120, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--generation.response_format", "@"+schemaFile, "--generation.max_tokens", "4096", "--generation.schema_retries", "2")...)
	if code := exitCode(r.err); code != exitIncomplete {
		t.Fatalf("exit %d (%v), want %d\nstderr:\n%s", code, r.err, exitIncomplete, r.stderr)
	}

	v, err := shape.Compile(job.ResponseFormat{Type: job.FormatJSONSchema, Schema: json.RawMessage(judgeSchema)})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, cj.dir)
	for _, rec := range recs {
		if err := v.Check(rec.Content); err != nil {
			t.Errorf("record %s is not valid for the schema: %v", rec.ID, err)
		}
		if rec.Reasoning == "" {
			t.Errorf("record %s has no reasoning: the thought before the JSON was lost", rec.ID)
		}
	}
	errs := cliErrors(t, cj.dir)
	var seven *sink.ErrorRecord
	for i, e := range errs {
		if e.Cause != shape.Cause || e.Attempts != 3 {
			t.Errorf("error record %+v: want cause schema after 3 attempts", e)
		}
		if e.ID == "7" {
			seven = &errs[i]
		}
	}
	if seven == nil {
		t.Fatalf("the prompt answered out of shape every time is not in errors/: %+v", errs)
	}
	if !strings.Contains(seven.Message, "not valid for generation.response_format: not JSON") || !strings.Contains(seven.Message, "it began: ") {
		t.Errorf("error message %q: want the validator's message and the answer's start", seven.Message)
	}
	if len(recs)+len(errs) != 120 {
		t.Errorf("%d records and %d errors for 120 prompts", len(recs), len(errs))
	}

	rep := readReport(t, cj.dir)
	schemaRetries := rep.RetriesByCause[shape.Cause]
	if schemaRetries == 0 || rep.Retries != schemaRetries {
		t.Errorf("retries %d by cause %v: want schema retries and no other", rep.Retries, rep.RetriesByCause)
	}
	if got, want := schemaRetries+int64(len(errs)), m.Stats().InvalidJSON+3; got != want {
		t.Errorf("%d schema retries + %d errors, want the mock's %d invalid answers + 3 for prompt 7", schemaRetries, len(errs), m.Stats().InvalidJSON)
	}
	if !strings.Contains(r.stdout, "schema") {
		t.Errorf("the summary does not show the schema retries:\n%s", r.stdout)
	}
	t.Logf("120 prompts: %d records, %d errors, %d schema retries, the mock spoilt %d answers", len(recs), len(errs), schemaRetries, m.Stats().InvalidJSON)

	// --retry-errors asks the failed ones again; prompt 7 fails again.
	cliRun(t, cj.args("--generation.response_format", "@"+schemaFile, "--generation.max_tokens", "4096", "--retry-errors")...)
	if n := len(readRecords(t, cj.dir)); n < len(recs) || n > 119 {
		t.Errorf("%d records after --retry-errors, want %d to 119", n, len(recs))
	}
}

func readRecords(t *testing.T, dir string) []sink.Record {
	t.Helper()
	var out []sink.Record
	countJSONL(t, filepath.Join(dir, "data"), func(line []byte) (string, error) {
		var r sink.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return "", err
		}
		out = append(out, r)
		return r.ID, nil
	})
	return out
}

// TestRunSchemaChangeRefused: the schema is part of the job: a resume with
// another schema (or none) is refused naming generation.response_format;
// the same schema from another file, spaced otherwise, is the same job.
func TestRunSchemaChangeRefused(t *testing.T) {
	_, url := cliMock(t, nil)
	first := writeText(t, "judge.schema.json", judgeSchema)
	cj := cliJob{baseURL: url, data: cliDataset(t, 6, 0), dir: filepath.Join(t.TempDir(), "out")}
	base := []string{"--generation.max_tokens", "4096"}
	cliRun(t, cj.args(append(base, "--generation.response_format", "@"+first)...)...).ok(t, "first run")

	other := writeText(t, "other.json", strings.Replace(judgeSchema, `"maximum": 10`, `"maximum": 5`, 1))
	for name, args := range map[string][]string{
		"another schema": {"--generation.response_format", "@" + other},
		"json_object":    {"--generation.response_format", "json_object"},
		"none":           {},
	} {
		r := cliRun(t, cj.args(append(base, args...)...)...)
		if code := exitCode(r.err); code != exitUsage {
			t.Fatalf("%s: exit %d (%v), want %d", name, code, r.err, exitUsage)
		}
		msg := r.err.Error()
		if !strings.Contains(msg, "generation.response_format: json_schema") || !strings.Contains(msg, "(on disk) ->") || strings.Contains(msg, "generation.max_tokens") {
			t.Errorf("%s: refusal %q: want generation.response_format named, and nothing else", name, msg)
		}
	}
	// The same schema, reformatted, in another file: the same job.
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(judgeSchema)); err != nil {
		t.Fatal(err)
	}
	same := writeText(t, "same.json", compact.String()+"\n")
	r := cliRun(t, cj.args(append(base, "--generation.response_format", "@"+same, "--quiet=false")...)...)
	r.ok(t, "the same schema from another file")
	if !strings.Contains(r.stderr, "nothing to do") {
		t.Errorf("the same job did not resume:\n%s", r.stderr)
	}
}

// TestRunSchemaConfigErrors: a schema that does not compile, or a file
// that is not there, stops the run before any request, exit 2, naming the
// key, where it was set and the file.
func TestRunSchemaConfigErrors(t *testing.T) {
	m, url := cliMock(t, nil)
	bad := writeText(t, "bad.schema.json", `{"type": "object", "properties": {"score": {"type": "int"}}}`)
	cfgFile := writeText(t, "run.yaml", "generation:\n  max_tokens: 100\n  response_format: \"@"+bad+"\"\n")
	cj := cliJob{baseURL: url, data: cliDataset(t, 3, 0), dir: filepath.Join(t.TempDir(), "out")}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"does not compile", []string{"--config", cfgFile},
			[]string{cfgFile + ":3: generation.response_format (schema file " + bad + "): the schema is not a valid JSON Schema: at '/properties/score/type'"}},
		{"inline, from a flag", []string{"--generation.response_format", `{"type":"object","required":"score"}`},
			[]string{"flag --generation.response_format: generation.response_format: the schema is not a valid JSON Schema: at '/required': got string, want array"}},
		{"no such file", []string{"--generation.response_format", "@" + filepath.Join(t.TempDir(), "absent.json")},
			[]string{"flag --generation.response_format: generation.response_format: read the schema file: open ", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cliRun(t, cj.args(tt.args...)...)
			if code := exitCode(r.err); code != exitUsage {
				t.Fatalf("exit %d (%v), want %d", code, r.err, exitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q does not say %q", r.err, w)
				}
			}
			if r.hint() == "" {
				t.Error("no hint")
			}
		})
	}
	if n := m.Stats().Requests; n != 0 {
		t.Errorf("%d requests sent by runs refused at start", n)
	}
}

// TestRunSchemaNoReasoningParser: a server without a reasoning parser that
// does not hold the thought to the schema sends it in think tags in the
// content: no answer is JSON, each is an error that says to start the
// server with a reasoning parser.
func TestRunSchemaNoReasoningParser(t *testing.T) {
	_, url := noParserMock(t)
	cj := cliJob{baseURL: url, data: cliDataset(t, 4, 0), dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--generation.response_format", judgeSchema, "--generation.max_tokens", "4096", "--generation.schema_retries", "1")...)
	if code := exitCode(r.err); code != exitIncomplete {
		t.Fatalf("exit %d (%v), want %d", code, r.err, exitIncomplete)
	}
	errs := cliErrors(t, cj.dir)
	if len(errs) != 4 {
		t.Fatalf("%d errors, want 4", len(errs))
	}
	for _, e := range errs {
		if e.Cause != shape.Cause || !strings.Contains(e.Message, "starts with <think>") || !strings.Contains(e.Message, "--reasoning-parser") {
			t.Errorf("error %+v: want cause schema and the think tags named", e)
		}
	}
}

// TestJobResponseFormat: the response format is part of the job, by its
// content; schema_retries is not.
func TestJobResponseFormat(t *testing.T) {
	base := config.Default().Job(dataset.Shard{})
	rf, err := config.ParseResponseFormat(judgeSchema)
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.Generation.ResponseFormat = rf
	j := c.Job(dataset.Shard{})
	if d := j.Diff(base); len(d) != 1 || d[0].Key != "generation.response_format" || j.Hash() == base.Hash() {
		t.Errorf("Diff %+v: want generation.response_format", d)
	}
	if got := j.Sampling.ResponseFormat; got.Type != job.FormatJSONSchema || got.Name != "response" || !got.Strict || string(got.Schema) != string(rf.Schema) {
		t.Errorf("job's format %+v", got)
	}
	c = config.Default()
	c.Generation.SchemaRetries = 9
	if c.Job(dataset.Shard{}).Hash() != base.Hash() {
		t.Error("schema_retries changed the job")
	}
}
