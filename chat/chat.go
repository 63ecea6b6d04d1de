// Package chat is synthgen's one vocabulary of a conversation: a turn
// (Message), the tool calls an assistant turn makes (ToolCall) and the
// function each names (ToolFunction), OpenAI's shape. A dataset row is read
// into these, the wire client sends them and reads an answer's calls into
// them, and the record stores them: one type from row to record, so nothing
// copies a conversation from one package's type to another's. It imports
// nothing of synthgen's; the mock server keeps types of its own, as a server
// that should not share the client's mistakes.
//
// The tags are an interface: the record's JSON keys and Parquet columns
// (docs/reference.md, "The record") and the request body's messages are
// these fields, in this order, so a change here changes every part file.
package chat

// Message is one chat turn with an OpenAI role (system, user, assistant,
// tool). An assistant turn may carry ToolCalls (its Content then possibly
// empty: null in the row), a tool turn the ToolCallID it answers. A
// request sends the turns it is given as they are, without a copy, so a
// caller does not change a Message once it has sent it.
type Message struct {
	Role       string     `json:"role" parquet:"role"`
	Content    string     `json:"content" parquet:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
	ToolCallID string     `json:"tool_call_id,omitempty" parquet:"tool_call_id,optional"`
}

// ToolCall is one call of a tool, OpenAI's shape: Arguments is the JSON
// text as the model (or the row) wrote it, valid JSON or not.
type ToolCall struct {
	ID       string       `json:"id" parquet:"id"`
	Type     string       `json:"type" parquet:"type"`
	Function ToolFunction `json:"function" parquet:"function"`
}

// ToolFunction is the function a ToolCall names and its arguments.
type ToolFunction struct {
	Name      string `json:"name" parquet:"name"`
	Arguments string `json:"arguments" parquet:"arguments"`
}
