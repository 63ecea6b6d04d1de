package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/job"
)

// TestEncodeRequestResponseFormat: the job's shape goes as OpenAI's
// response_format, the schema exactly as the job holds it (its keys in
// the order written); extra_body's or a row's own response_format
// replaces it, as every other field.
func TestEncodeRequestResponseFormat(t *testing.T) {
	schema := `{"type":"object","properties":{"score":{"type":"integer"},"reason":{"type":"string","pattern":"^<.*>$"}},"required":["score","reason"]}`
	withSchema := job.Sampling{Model: "m", Temperature: 0, ResponseFormat: job.ResponseFormat{Type: job.FormatJSONSchema, Name: "judge", Schema: json.RawMessage(schema), Strict: true}}
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"json_schema", Request{Sampling: withSchema},
			`{"model":"m","messages":[],"temperature":0,"stream":false,"response_format":{"type":"json_schema","json_schema":{"name":"judge","schema":` + schema + `,"strict":true}}}`},
		{"json_object", Request{Sampling: job.Sampling{Model: "m", ResponseFormat: job.ResponseFormat{Type: job.FormatJSONObject}}, Stream: true},
			`{"model":"m","messages":[],"temperature":0,"stream":true,"stream_options":{"include_usage":true},"response_format":{"type":"json_object"}}`},
		{"none", Request{Sampling: job.Sampling{Model: "m"}},
			`{"model":"m","messages":[],"temperature":0,"stream":false}`},
		{"the row's own", Request{Sampling: withSchema, Params: map[string]any{"response_format": map[string]any{"type": "text"}}},
			`{"model":"m","messages":[],"temperature":0,"stream":false,"response_format":{"type":"text"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := EncodeRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if string(body) != tt.want {
				t.Errorf("body\n %s\nwant\n %s", body, tt.want)
			}
			if !json.Valid(body) {
				t.Errorf("body is not JSON: %s", body)
			}
		})
	}
	bad := withSchema
	bad.ResponseFormat.Schema = json.RawMessage(`{"type":`)
	if _, err := EncodeRequest(Request{Sampling: bad}); err == nil || !strings.Contains(err.Error(), "response_format") {
		t.Errorf("a schema that is not JSON: err %v, want one naming response_format", err)
	}
}
