// Package dataset reads prompts from dataset files one row at a time: JSONL,
// JSON arrays and Parquet (gzip/zstd transparently), in the ShareGPT, OpenAI
// messages, plain prompt, Alpaca and OpenAI batch request row shapes. It never holds a whole file in
// memory and talks to no LLM server. hf:// datasets are fetched from the
// Hugging Face Hub into a local cache first, by the Remote the caller sets
// (package dataset/hub); this package itself links no HTTP client.
package dataset

import "github.com/synthgen/synthgen/chat"

// Prompt is one dataset row turned into the conversation to send: the turns
// up to (not including) the first assistant turn.
type Prompt struct {
	// ID is the id column when Options.IDField is set, else the 0-based
	// physical row index in decimal, counted across all files in sorted order.
	ID string
	// Index is the 0-based physical row index across all files.
	Index int64
	// Messages is the conversation to send: the turns up to the first
	// assistant turn.
	Messages []chat.Message
	// Conversation is every turn of a multi-turn row when the reader was
	// asked for whole conversations (Options.Conversations), assistant turns
	// as empty placeholders for the model's own answers (one for assistant
	// turns in a row: never two in a row); nil otherwise, and for the
	// shapes that hold a single prompt.
	Conversation []chat.Message
	// Source is the row's source/category column, when it has one.
	Source string
	// Tools is the row's tools list, JSON text as sent ("" none): a
	// messages row's tools column, a batch row's body.tools.
	Tools string
	// Params are a request row's own request fields (openai-batch: every
	// body key but model, messages, stream, stream_options and n), as
	// decoded: JSON numbers stay json.Number, so a value reaches the server
	// as the row wrote it. Each replaces the job's field of that name for
	// this row. nil for the other shapes.
	Params map[string]any
	// Ignored are the request fields this row set that synthgen decides
	// for itself (body.stream, body.stream_options: generation.stream says
	// how answers are read); Options.OnIgnored hears of each once.
	Ignored []string
	// Model is the model a request row names (body.model), "" when none.
	// The server serves one model: the job's is asked whatever a row says.
	Model string
	// Hint is the size (bytes of content) of the row's own answer that the
	// job regenerates: its first assistant turn after the prompt, or with
	// whole conversations (Options.Conversations) the sum of its assistant
	// turns. 0 when the row has none (and for the shapes that hold a
	// single prompt). The producer starts long answers first by it.
	Hint int
	// Location is "file:line" (JSONL) or "file:row N" (Parquet, JSON array),
	// for messages about this row.
	Location string
}
