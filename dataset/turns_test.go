package dataset

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
)

func shown2(ms []chat.Message) string {
	var parts []string
	for _, m := range ms {
		if m.Role == "assistant" && m.Content == "" {
			parts = append(parts, "A")
			continue
		}
		parts = append(parts, m.Role+":"+m.Content)
	}
	return strings.Join(parts, " ")
}

// Assistant turns in a row: the first turns mode asks up to the first of
// them; regenerating whole conversations makes them one answer (a system
// turn between them keeps them apart, an empty one, not sent, does not).
// A request row (openai-batch) sent as given must not end with an
// assistant turn, unless it asks to continue it.
func TestAssistantTurnsInARow(t *testing.T) {
	m := func(role, content string) string { return fmt.Sprintf(`{"role":%q,"content":%q}`, role, content) }
	g := func(from, value string) string { return fmt.Sprintf(`{"from":%q,"value":%q}`, from, value) }
	cases := []struct {
		name, row     string
		first, whole  string // Messages, Conversation
		firstBad, bad string // the field of a bad row, "" none
	}{
		{"two answers mid-conversation", `{"messages":[` + strings.Join([]string{m("user", "u1"), m("assistant", "a"), m("assistant", "b"), m("user", "u2"), m("assistant", "c")}, ",") + `]}`,
			"user:u1", "user:u1 A user:u2 A", "", ""},
		{"two answers at the end, sharegpt", `{"conversations":[` + strings.Join([]string{g("human", "u1"), g("gpt", "a"), g("gpt", "b")}, ",") + `]}`,
			"user:u1", "user:u1 A", "", ""},
		{"a system turn between", `{"messages":[` + strings.Join([]string{m("user", "u1"), m("assistant", "a"), m("system", "be brief"), m("assistant", "b")}, ",") + `]}`,
			"user:u1", "user:u1 A system:be brief A", "", ""},
		{"an empty system turn between", `{"messages":[` + strings.Join([]string{m("user", "u1"), m("assistant", "a"), m("system", ""), m("assistant", "b")}, ",") + `]}`,
			"user:u1", "user:u1 A", "", ""},
		{"batch ending with an answer", `{"custom_id":"r","body":{"messages":[` + m("user", "u1") + "," + m("assistant", "a") + `]}}`,
			"", "", "body.messages[1].role", "body.messages[1].role"},
		{"batch continuing its answer", `{"custom_id":"r","body":{"continue_final_message":true,"messages":[` + m("user", "u1") + "," + m("assistant", "a") + `]}}`,
			"user:u1 assistant:a", "", "", ""},
		{"batch with two answers mid-conversation", `{"custom_id":"r","body":{"messages":[` + strings.Join([]string{m("user", "u1"), m("assistant", "a"), m("assistant", "b"), m("user", "u2")}, ",") + `]}}`,
			"user:u1 assistant:a assistant:b user:u2", "", "", ""},
	}
	dir := t.TempDir()
	for i, c := range cases {
		path := writeFile(t, dir, fmt.Sprintf("r%d.jsonl", i), c.row+"\n")
		for _, whole := range []bool{false, true} {
			ps, bad := readAll(t, Options{Selection: Selection{Path: path}, Conversations: whole})
			wantBad := map[bool]string{false: c.firstBad, true: c.bad}[whole]
			if wantBad != "" {
				if len(bad) != 1 || bad[0].Field != wantBad || !errors.Is(bad[0], ErrEndsWithAnswer) {
					t.Errorf("%s (whole %v): bad rows %v, want one at %s", c.name, whole, bad, wantBad)
				}
				continue
			}
			if len(ps) != 1 || len(bad) != 0 {
				t.Fatalf("%s (whole %v): %d prompts, bad rows %v", c.name, whole, len(ps), bad)
			}
			if got := shown2(ps[0].Messages); got != c.first {
				t.Errorf("%s (whole %v): messages %q, want %q", c.name, whole, got, c.first)
			}
			if want := map[bool]string{false: "", true: c.whole}[whole]; shown2(ps[0].Conversation) != want {
				t.Errorf("%s (whole %v): conversation %q, want %q", c.name, whole, shown2(ps[0].Conversation), want)
			}
		}
	}
}
