package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// specforgeValidate applies to one exported JSONL file the checks of
// SpecForge's scripts/validate_regenerated_data.py (validate_dataset and
// validate_row) and of the validate_conversation it calls, from
// scripts/conversation_validation.py (sgl-project/SpecForge, read at
// a6b6b02). It returns the rows and their assistant turns, or the first
// refusal with its line, as the script stops at the first one.
//
// The checks, in the script's order:
//   - iter_jsonl: a blank line is skipped; every other line is JSON and an
//     object;
//   - validate_row: "id" is a string, non-empty after str.strip();
//     "status" is exactly "success";
//   - validate_conversation: "conversations" is a non-empty list; each
//     message is an object whose "content" is a string, non-empty after
//     str.strip(); a "system" message is allowed only before the first user
//     message; any other role is "user" or "assistant", alternating and
//     starting with "user"; there is a user message;
//   - validate_row, per assistant message: "reasoning_content" is absent,
//     null or a string; with --expect-reasoning a non-blank string; with
//     --strict-think-markers neither content nor reasoning_content holds
//     <think> or </think> (case-insensitively);
//   - validate_row: there is an assistant message and the last message is
//     one;
//   - validate_dataset: the file holds at least one row (repeated ids are
//     allowed).
func specforgeValidate(path string, expectReasoning, strictThinkMarkers bool) (rows, assistants int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(pyStrip(string(line))) == 0 {
			continue
		}
		a, err := specforgeValidateRow(line, expectReasoning, strictThinkMarkers)
		if err != nil {
			return rows, assistants, fmt.Errorf("line %d: %w", n+1, err)
		}
		rows++
		assistants += a
	}
	if rows == 0 {
		return 0, 0, fmt.Errorf("%s contains no data rows", path)
	}
	return rows, assistants, nil
}

func specforgeValidateRow(line []byte, expectReasoning, strictThinkMarkers bool) (int, error) {
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return 0, fmt.Errorf("invalid JSON: %v", err)
	}
	row, ok := v.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("expected a JSON object")
	}
	if id, ok := row["id"].(string); !ok || pyStrip(id) == "" {
		return 0, fmt.Errorf("id must be a non-empty string")
	}
	if row["status"] != "success" {
		return 0, fmt.Errorf("status must be 'success'")
	}
	msgs, ok := row["conversations"].([]any)
	if !ok || len(msgs) == 0 {
		return 0, fmt.Errorf("conversations must be a non-empty list")
	}
	expected, sawUser := "user", false
	turns := make([]map[string]any, len(msgs))
	for i, x := range msgs {
		m, ok := x.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("message %d must be an object", i)
		}
		turns[i] = m
		if c, ok := m["content"].(string); !ok || pyStrip(c) == "" {
			return 0, fmt.Errorf("message %d content must be a non-empty string", i)
		}
		role := m["role"]
		if role == "system" && !sawUser {
			continue
		}
		if role != "user" && role != "assistant" {
			return 0, fmt.Errorf("message %d has unsupported role %v", i, role)
		}
		if role != expected {
			return 0, fmt.Errorf("message %d expected role %s, got %v", i, expected, role)
		}
		sawUser = true
		expected = map[string]string{"user": "assistant", "assistant": "user"}[expected]
	}
	if !sawUser {
		return 0, fmt.Errorf("conversation has no user message")
	}
	assistants := 0
	for i, m := range turns {
		if m["role"] != "assistant" {
			continue
		}
		assistants++
		r, has := m["reasoning_content"]
		rs, isString := r.(string)
		if has && r != nil && !isString {
			return 0, fmt.Errorf("assistant message %d reasoning_content must be a string or null", i)
		}
		if expectReasoning && (!isString || pyStrip(rs) == "") {
			return 0, fmt.Errorf("assistant message %d has empty reasoning_content", i)
		}
		if strictThinkMarkers && (thinkMarker(m["content"].(string)) || thinkMarker(rs)) {
			return 0, fmt.Errorf("assistant message %d contains a thinking marker", i)
		}
	}
	if assistants == 0 {
		return 0, fmt.Errorf("conversation has no assistant message")
	}
	if turns[len(turns)-1]["role"] != "assistant" {
		return 0, fmt.Errorf("conversation must end with an assistant message")
	}
	return assistants, nil
}

// pyStrip is Python's str.strip(): it trims what str.isspace() holds,
// which is unicode.IsSpace plus U+001C..U+001F.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return (r >= 0x1c && r <= 0x1f) || strings.ContainsRune("\t\n\v\f\r \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000", r) ||
			(r >= 0x2000 && r <= 0x200a)
	})
}

// thinkMarker is has_think_marker: <think> or </think>, any case.
func thinkMarker(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "<think>") || strings.Contains(l, "</think>")
}

// TestExportPassesSpecForgeValidation: an output directory the engine
// wrote against the mock (a system prompt, whole conversations of up to
// three turns regenerated, reasoning from the server) exports as
// --format specforge rows that pass every check of SpecForge's
// validate_regenerated_data.py: with reasoning in reasoning_content (and
// no think marker anywhere, --strict-think-markers), and with
// --reasoning inline (the reasoning in content, in <think> tags). A row
// the script would refuse (a user turn blank to Python's strip, though
// not to Go's) is dropped by the specforge filter and counted.
func TestExportPassesSpecForgeValidation(t *testing.T) {
	t.Parallel()
	_, url := cliMock(t, nil)
	var b strings.Builder
	const rows = 12
	for i := range rows {
		switch {
		case i == 5:
			b.WriteString(`{"messages":[{"role":"user","content":"\u001c"}]}` + "\n")
		case i%3 == 0:
			fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d"}]}`+"\n", i)
		default:
			fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d a"},{"role":"assistant","content":"old"},{"role":"user","content":"q%d b"},{"role":"assistant","content":"old"},{"role":"user","content":"q%d c"}]}`+"\n", i, i, i)
		}
	}
	data := filepath.Join(t.TempDir(), "conversations.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	j := cliJob{baseURL: url, data: data, dir: dir}
	cliRun(t, j.args("--generation.system_prompt", "Be brief.", "--generation.turns", "all", "--generation.max_tokens", "100000")...).ok(t, "run")

	field := filepath.Join(t.TempDir(), "field.jsonl")
	r := cliRun(t, "export", dir, "--format", "specforge", "--out", field)
	r.ok(t, "export")
	if !strings.Contains(r.stderr, "dropped  specforge  1:") {
		t.Errorf("the row SpecForge refuses is not counted as dropped by the specforge filter:\n%s", r.stderr)
	}
	n, assistants, err := specforgeValidate(field, false, true)
	if err != nil {
		t.Fatalf("validate_regenerated_data.py --strict-think-markers would refuse %s: %v", field, err)
	}
	if n < rows/2 || assistants <= n {
		t.Errorf("%d rows, %d assistant turns: want most of the %d rows, whole conversations among them", n, assistants, rows)
	}

	inline := filepath.Join(t.TempDir(), "inline.jsonl")
	cliRun(t, "export", dir, "--format", "specforge", "--reasoning", "inline", "--out", inline).ok(t, "export --reasoning inline")
	if n2, _, err := specforgeValidate(inline, false, false); err != nil || n2 != n {
		t.Fatalf("validate_regenerated_data.py would refuse %s (%d rows, want %d): %v", inline, n2, n, err)
	}
	// The reasoning of every assistant turn is in its content, in the
	// tags, and no reasoning_content is left.
	withReasoning := 0
	for _, line := range readLines(t, inline) {
		var row struct {
			Conversations []map[string]any `json:"conversations"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		for _, m := range row.Conversations {
			if _, has := m["reasoning_content"]; has {
				t.Errorf("--reasoning inline left reasoning_content: %v", m)
			}
			c, _ := m["content"].(string)
			if m["role"] == "assistant" && strings.HasPrefix(c, "<think>\n") {
				if !strings.Contains(c, "\n</think>\n\n") {
					t.Errorf("inline reasoning not closed as <think>\\n...\\n</think>\\n\\n: %q", c)
				}
				withReasoning++
			}
		}
	}
	if withReasoning == 0 {
		t.Error("no assistant turn carries its reasoning inline")
	}
}
