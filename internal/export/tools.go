package export

import "github.com/synthgen/synthgen/sink"

// messageTurn is a turn of the messages format: OpenAI's, an assistant
// turn's tool_calls ({id, type, function: {name, arguments}}, arguments
// the JSON text as the model sent it) and a tool turn's tool_call_id
// beside role and content, as Hugging Face chat templates read them. The
// other formats' tool conventions are not written yet: their turns carry
// role and content alone.
type messageTurn struct {
	Role             string          `json:"role" parquet:"role"`
	Content          string          `json:"content" parquet:"content"`
	ReasoningContent string          `json:"reasoning_content,omitempty" parquet:"reasoning_content,optional"`
	ToolCalls        []sink.ToolCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
	ToolCallID       string          `json:"tool_call_id,omitempty" parquet:"tool_call_id,optional"`
}
