package batchapi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Line is one request of a batch's input file.
type Line struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// LineError is a batch's validation error, as in the batch's errors.data.
type LineError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

func lineError(line int, code, param, format string, args ...any) *LineError {
	e := &LineError{Code: code, Message: fmt.Sprintf(format, args...)}
	if line > 0 {
		e.Line = &line
	}
	if param != "" {
		e.Param = &param
	}
	return e
}

// ParseLine parses input line n (from 1) of a batch for endpoint, or
// says what is wrong with it.
func ParseLine(n int, b []byte, endpoint string) (Line, *LineError) {
	var l Line
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&l); err != nil || d.More() {
		return l, lineError(n, "invalid_json_line", "", "This line is not parseable as valid JSON.")
	}
	switch {
	case l.CustomID == "":
		return l, lineError(n, "missing_required_parameter", "custom_id", "Missing required parameter: 'custom_id'.")
	case l.Method != "POST":
		return l, lineError(n, "invalid_value", "method", "Invalid value for 'method': %q; only POST is supported.", l.Method)
	case l.URL != endpoint:
		return l, lineError(n, "mismatched_endpoint", "url", "The url %q does not match the batch's endpoint %s.", l.URL, endpoint)
	case len(l.Body) == 0 || l.Body[0] != '{':
		return l, lineError(n, "missing_required_parameter", "body", "Missing required parameter: 'body' (a JSON object).")
	}
	return l, nil
}

// parseInput parses a whole input file: every line, no repeated custom_id,
// at most max lines. It returns the first errors found (at most 10).
func parseInput(data []byte, endpoint string, max int) ([]Line, []*LineError) {
	var lines []Line
	var errs []*LineError
	seen := map[string]int{}
	n := 0
	for len(data) > 0 && len(errs) < 10 {
		var b []byte
		b, data, _ = bytes.Cut(data, []byte("\n"))
		n++
		if len(bytes.TrimSpace(b)) == 0 && len(data) == 0 {
			break // the file's final newline
		}
		l, e := ParseLine(n, b, endpoint)
		if e == nil && seen[l.CustomID] > 0 {
			e = lineError(n, "duplicate_custom_id", "custom_id", "The custom_id %q is also on line %d.", l.CustomID, seen[l.CustomID])
		}
		if e != nil {
			errs = append(errs, e)
			continue
		}
		seen[l.CustomID] = n
		lines = append(lines, l)
	}
	switch {
	case len(errs) > 0:
	case len(lines) == 0:
		errs = append(errs, lineError(0, "empty_file", "input_file_id", "The input file has no requests."))
	case len(lines) > max:
		errs = append(errs, lineError(0, "too_many_requests", "input_file_id", "The input file has %d requests, more than the limit of %d.", len(lines), max))
	}
	return lines, errs
}
