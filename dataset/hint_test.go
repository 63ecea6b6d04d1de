package dataset

import (
	"fmt"
	"strings"
	"testing"
)

// A row's hint is the size of the answer the job regenerates: the first
// assistant turn after the prompt for a first-turn job, the sum of the
// assistant turns for whole conversations; 0 when the row has none.
func TestHint(t *testing.T) {
	m := func(role, content string) string { return fmt.Sprintf(`{"role":%q,"content":%q}`, role, content) }
	g := func(from, value string) string { return fmt.Sprintf(`{"from":%q,"value":%q}`, from, value) }
	cases := []struct {
		name, row    string
		first, whole int
	}{
		{"sharegpt", `{"conversations":[` + strings.Join([]string{g("human", "u1"), g("gpt", "four"), g("human", "u2"), g("gpt", "sixsix")}, ",") + `]}`, 4, 10},
		{"messages", `{"messages":[` + strings.Join([]string{m("system", "s"), m("user", "u1"), m("assistant", "abc"), m("user", "u2"), m("assistant", "de")}, ",") + `]}`, 3, 5},
		{"mixed keys", `{"messages":[` + m("user", "u1") + "," + g("gpt", "12345") + `]}`, 5, 5},
		{"content parts", `{"messages":[` + m("user", "u1") + `,{"role":"assistant","content":[{"type":"text","text":"hello"}]}]}`, 5, 5},
		{"no answer", `{"messages":[` + m("user", "u1") + `]}`, 0, 0},
		{"an answer with tool calls only", `{"messages":[` + m("user", "u1") + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"},` + m("assistant", "done") + `]}`, 0, 4},
		{"prompt row", `{"prompt":"say hi"}`, 0, 0},
		{"alpaca row", `{"instruction":"do","output":"long output"}`, 0, 0},
	}
	dir := t.TempDir()
	for i, c := range cases {
		path := writeFile(t, dir, fmt.Sprintf("h%d.jsonl", i), c.row+"\n")
		for _, whole := range []bool{false, true} {
			ps, bad := readAll(t, Options{Selection: Selection{Path: path}, Conversations: whole})
			if len(bad) != 0 || len(ps) != 1 {
				t.Fatalf("%s (whole %v): %d prompts, bad %v", c.name, whole, len(ps), bad)
			}
			want := map[bool]int{false: c.first, true: c.whole}[whole]
			if ps[0].Hint != want {
				t.Errorf("%s (whole %v): hint %d, want %d", c.name, whole, ps[0].Hint, want)
			}
		}
	}
}
