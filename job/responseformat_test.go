package job

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

func init() {
	answerChanges["generation.response_format"] = func(j *Job) {
		j.Sampling.ResponseFormat = ResponseFormat{Type: FormatJSONSchema, Name: "answer", Schema: json.RawMessage(`{"type":"object"}`), Strict: true}
	}
}

// TestResponseFormatIdentity: the schema's content is the job's, not its
// spelling: whitespace and the manifest's escaping of < leave the hash
// alone; another schema, name, strictness or type changes it, and a
// refused resume names generation.response_format. No format at all keeps
// the hash a job had before the setting existed.
func TestResponseFormatIdentity(t *testing.T) {
	withSchema := func(schema, name string, strict bool) Job {
		j := baseJob()
		j.Sampling.ResponseFormat = ResponseFormat{Type: FormatJSONSchema, Name: name, Schema: json.RawMessage(schema), Strict: strict}
		return j
	}
	base := withSchema(`{"type":"object","properties":{"p":{"pattern":"^<a>$"}}}`, "answer", true)
	same := []Job{
		withSchema("{ \"type\": \"object\",\n \"properties\": {\"p\": {\"pattern\": \"^<a>$\"}} }", "answer", true),
		withSchema(`{"type":"object","properties":{"p":{"pattern":"^\u003ca\u003e$"}}}`, "answer", true),
		roundTrip(t, base),
	}
	for i, j := range same {
		if j.Hash() != base.Hash() || len(j.Diff(base)) != 0 {
			t.Errorf("case %d: the same schema is another job: %+v", i, j.Diff(base))
		}
	}
	other := map[string]Job{
		"another schema": withSchema(`{"type":"object","properties":{"p":{"pattern":"^<b>$"}}}`, "answer", true),
		"keys reordered": withSchema(`{"properties":{"p":{"pattern":"^<a>$"}},"type":"object"}`, "answer", true),
		"another name":   withSchema(`{"type":"object","properties":{"p":{"pattern":"^<a>$"}}}`, "verdict", true),
		"not strict":     withSchema(`{"type":"object","properties":{"p":{"pattern":"^<a>$"}}}`, "answer", false),
		"json_object": func() Job {
			j := baseJob()
			j.Sampling.ResponseFormat = ResponseFormat{Type: FormatJSONObject}
			return j
		}(),
		"no format at all": baseJob(),
	}
	for name, j := range other {
		d := j.Diff(base)
		if j.Hash() == base.Hash() || len(d) != 1 || d[0].Key != "generation.response_format" {
			t.Errorf("%s: hash unchanged or Diff %+v, want generation.response_format", name, d)
		}
	}
	msg := (&MismatchError{Dir: "out", Changes: other["another schema"].Diff(base)}).Error()
	for _, s := range []string{"generation.response_format: json_schema \"answer\"", "(on disk) -> json_schema", "sha256"} {
		if !strings.Contains(msg, s) {
			t.Errorf("MismatchError %q does not say %q", msg, s)
		}
	}
}

// TestResponseFormatLeavesOlderHashes: a job without a response format
// hashes as it did before the setting existed (the manifest of an older
// directory has no response_format: its resume must find the same job).
func TestResponseFormatLeavesOlderHashes(t *testing.T) {
	j := baseJob()
	// Pinned from the code before generation.response_format existed.
	if h, want := j.Hash(), "d5b7b8111e1baca7ab96f96807418e60ccc18dbe7ac06d3063e5bbe2a013efd2"; h != want {
		t.Errorf("hash of the base job %s, want %s as before generation.response_format: older directories would be refused", h, want)
	}
	spec, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(spec), "response_format") {
		t.Errorf("the manifest's job says response_format when none is set: %s", spec)
	}
	// A directory made before the setting: its manifest's job has no
	// response_format; the same job now resumes it.
	sj, err := j.ManifestEntry("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Check(t.TempDir(), false)(&sink.Manifest{JobHash: sj.Hash, Job: sj.Spec}); err != nil {
		t.Errorf("the same job is refused: %v", err)
	}
}
