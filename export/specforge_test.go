package export

import (
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// TestSpecForgeFilter: a record whose conversation SpecForge's
// validate_regenerated_data.py refuses is dropped by the specforge filter,
// each rule of scripts/conversation_validation.py once; a sound one (a
// whole regenerated conversation, reasoning inline or not) is kept; the
// other formats have no such filter.
func TestSpecForgeFilter(t *testing.T) {
	fs := (&Options{Format: FormatSpecForge}).filters()
	msgs := func(m ...chat.Message) *sink.Record {
		return &sink.Record{ID: "1", Messages: m, Content: "a", Reasoning: "r", FinishReason: "stop"}
	}
	user := chat.Message{Role: "user", Content: "q"}
	for name, rec := range map[string]*sink.Record{
		"a blank id":                    {ID: " ", Messages: []chat.Message{user}, Content: "a", FinishReason: "stop"},
		"a blank user turn":             msgs(chat.Message{Role: "user", Content: " \t"}),
		"a user turn blank to Python":   msgs(chat.Message{Role: "user", Content: "\x1c\u3000"}),
		"a blank system turn":           msgs(chat.Message{Role: "system", Content: ""}, user),
		"a tool turn answering no call": msgs(user, chat.Message{Role: "assistant", Content: "call"}, chat.Message{Role: "tool", Content: "42"}),
		"a system turn after a user":    msgs(user, chat.Message{Role: "system", Content: "s"}),
		"two user turns in a row":       msgs(user, user),
		"an assistant turn first":       msgs(chat.Message{Role: "assistant", Content: "hi"}, user),
		"a prompt ending in an answer":  msgs(user, chat.Message{Role: "assistant", Content: "prefill"}),
	} {
		i := drop(fs, rec, ReasoningField)
		if i < 0 || fs[i].Name != FilterSpecForge {
			t.Errorf("%s: dropped by %d, want the specforge filter", name, i)
		}
	}
	for _, mode := range ReasoningModes {
		if i := drop(fs, wholeRecord(), mode); i >= 0 {
			t.Errorf("a sound whole conversation (--reasoning %s) dropped by %s", mode, fs[i].Name)
		}
		sys := msgs(chat.Message{Role: "system", Content: "s"}, chat.Message{Role: "system", Content: "t"}, user)
		if i := drop(fs, sys, mode); i >= 0 {
			t.Errorf("two system turns before the user's (--reasoning %s) dropped by %s", mode, fs[i].Name)
		}
	}
	for _, f := range (&Options{Format: FormatShareGPT}).filters() {
		if f.Name == FilterSpecForge {
			t.Errorf("sharegpt has the specforge filter")
		}
	}
}
