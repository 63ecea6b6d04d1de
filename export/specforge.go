package export

import "fmt"

// SpecForge checks a regenerated dataset before training with
// scripts/validate_regenerated_data.py, whose conversation rules are in
// scripts/conversation_validation.py (validate_conversation). A row it
// refuses stops the whole validation, and SpecForge's chat-template parser
// would cut such a conversation short anyway; the specforge filter drops
// it from the export and counts it instead.

// specforgeRefusal is why SpecForge's validation refuses row, or "" when
// it passes. The rules, in the script's order: the id is a non-blank
// string; every turn's content is a non-blank string; system turns come
// only before the first user turn; every other turn is user or assistant,
// alternating from user; there is a user turn; the last turn is the
// assistant's. (status "success" and reasoning_content as a string or null
// hold for every row this package writes.)
func specforgeRefusal(row specforgeRow) string {
	if pyBlank(row.ID) {
		return "id must be a non-empty string"
	}
	if len(row.Conversations) == 0 {
		return "conversations must be a non-empty list"
	}
	if hasTools(row) {
		return specforgeToolRefusal(row)
	}
	expect, sawUser := "user", false
	for i, t := range row.Conversations {
		if pyBlank(t.Content) {
			return fmt.Sprintf("message %d content must be a non-empty string", i)
		}
		if t.Role == "system" && !sawUser {
			continue
		}
		if t.Role != "user" && t.Role != "assistant" {
			return fmt.Sprintf("message %d has unsupported role %q", i, t.Role)
		}
		if t.Role != expect {
			return fmt.Sprintf("message %d expected role %q, got %q", i, expect, t.Role)
		}
		sawUser = true
		if expect == "user" {
			expect = "assistant"
		} else {
			expect = "user"
		}
	}
	if !sawUser {
		return "conversation has no user message"
	}
	if row.Conversations[len(row.Conversations)-1].Role != "assistant" {
		return "conversation must end with an assistant message"
	}
	return ""
}

// pyBlank says whether s is empty after Python's str.strip(): every rune is
// one Python counts as whitespace. That is Unicode's White_Space, which
// unicode.IsSpace follows, plus the separators U+001C to U+001F.
func pyBlank(s string) bool {
	for _, r := range s {
		switch {
		case r >= 0x1c && r <= 0x1f:
		case r == ' ' || (r >= '\t' && r <= '\r') || r == 0x85 || r == 0xa0 || r == 0x1680 ||
			(r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f || r == 0x3000:
		default:
			return false
		}
	}
	return true
}
