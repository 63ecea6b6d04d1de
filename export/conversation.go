package export

import (
	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// Turn is one turn of an exported conversation. Reasoning is set only on
// an assistant turn the model answered (a turn of the prompt carries what
// was sent: role and content).
type Turn struct {
	Role      string
	Content   string
	Reasoning string
	// ToolCalls are an assistant turn's calls (the row's, or the model's
	// in its answer), ToolCallID the call a tool turn answers.
	ToolCalls  []chat.ToolCall
	ToolCallID string
}

// Conversation is the conversation a record holds: the messages exactly as
// they were sent (a system turn included when one was sent), then the
// model's answer as an assistant turn with its reasoning kept apart from
// its content. Every format is built from it, so this is the one place
// that knows how a record becomes turns. A whole conversation regenerated
// by the model (generation.turns: all) was sent for its last turn with the
// model's earlier answers in it: each of those assistant turns gets back
// the reasoning its answer had (rec.Turns), which was held back from the
// server but belongs to the training example.
func Conversation(rec *sink.Record) []Turn {
	turns := make([]Turn, 0, len(rec.Messages)+1)
	answered := 0
	for _, m := range rec.Messages {
		t := Turn{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		if m.Role == "assistant" && answered < len(rec.Turns)-1 {
			t.Reasoning = rec.Turns[answered].Reasoning
			answered++
		}
		turns = append(turns, t)
	}
	as := answers(rec)
	return append(turns, Turn{Role: "assistant", Content: rec.Content, Reasoning: rec.Reasoning, ToolCalls: as[len(as)-1].ToolCalls})
}

// answers are the model's answers a record holds: every turn of a whole
// conversation, else the one answer (its calls and ids the record's).
func answers(rec *sink.Record) []sink.Turn {
	if len(rec.Turns) > 0 {
		return rec.Turns
	}
	return []sink.Turn{{Reasoning: rec.Reasoning, Content: rec.Content, FinishReason: rec.FinishReason,
		PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens,
		PromptTokenIDs: rec.PromptTokenIDs, TokenIDs: rec.TokenIDs, ToolCalls: rec.ToolCalls}}
}

// Reasoning modes for the formats that offer a choice (sharegpt, messages).
const (
	ReasoningField  = "field"  // reasoning_content on the assistant turn
	ReasoningInline = "inline" // <think>\n...\n</think>\n\n before the content
	ReasoningDrop   = "drop"   // left out
)

// ReasoningModes lists the --reasoning values.
var ReasoningModes = []string{ReasoningField, ReasoningInline, ReasoningDrop}

// placeReasoning returns a turn's content and reasoning field as mode
// wants them.
func placeReasoning(t Turn, mode string) (content, field string) {
	switch {
	case t.Reasoning == "":
		return t.Content, ""
	case mode == ReasoningInline:
		return "<think>\n" + t.Reasoning + "\n</think>\n\n" + t.Content, ""
	case mode == ReasoningDrop:
		return t.Content, ""
	}
	return t.Content, t.Reasoning
}
