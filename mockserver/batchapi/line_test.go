package batchapi

import (
	"encoding/json"
	"testing"
)

func TestParseLineNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ line, code, param string }{
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`, "", ""},
		{`{"custom_id":"a"`, "invalid_json_line", ""},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}} {}`, "invalid_json_line", ""},
		{`{"method":"POST","url":"/v1/chat/completions","body":{}}`, "missing_required_parameter", "custom_id"},
		{`{"custom_id":"a","method":"GET","url":"/v1/chat/completions","body":{}}`, "invalid_value", "method"},
		{`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}}`, "mismatched_endpoint", "url"},
		{`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":"hi"}`, "missing_required_parameter", "body"},
	} {
		_, e := ParseLine(7, []byte(c.line), Endpoint)
		switch {
		case c.code == "" && e != nil:
			t.Errorf("%s: %+v", c.line, e)
		case c.code != "" && (e == nil || e.Code != c.code || *e.Line != 7 || (c.param != "") != (e.Param != nil) || (e.Param != nil && *e.Param != c.param)):
			t.Errorf("%s: %+v, want %s %s", c.line, e, c.code, c.param)
		}
	}
}

func TestParseInputRefusesRepeatsAndLimits(t *testing.T) {
	l := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}` + "\n"
	if _, errs := parseInput([]byte(l+l), Endpoint, 10); len(errs) != 1 || errs[0].Code != "duplicate_custom_id" || *errs[0].Line != 2 {
		t.Fatalf("repeat: %+v", errs)
	}
	if _, errs := parseInput(nil, Endpoint, 10); len(errs) != 1 || errs[0].Code != "empty_file" {
		t.Fatalf("empty: %+v", errs)
	}
	two := l + `{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{}}`
	if lines, errs := parseInput([]byte(two), Endpoint, 1); len(errs) != 1 || errs[0].Code != "too_many_requests" || len(lines) != 2 {
		t.Fatalf("limit: %+v", errs)
	}
}

func FuzzParseInput(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"x":1}}` + "\n{"))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, errs := parseInput(data, Endpoint, 5)
		if len(errs) == 0 && len(lines) == 0 {
			t.Fatal("no lines and no error")
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if l.CustomID == "" || seen[l.CustomID] || !json.Valid(l.Body) || l.Body[0] != '{' {
				t.Fatalf("accepted line %+v", l)
			}
			seen[l.CustomID] = true
		}
		for _, e := range errs {
			if e.Code == "" || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
		}
	})
}
