// Package dataset reads prompts from dataset files one row at a time: JSONL,
// JSON arrays and Parquet (gzip/zstd transparently), in the ShareGPT, OpenAI
// messages, plain prompt and Alpaca row shapes. It never holds a whole file in
// memory and talks to no LLM server; hf:// datasets are fetched from the
// Hugging Face Hub into a local cache first (hub.go).
package dataset

// Message is one chat turn with an OpenAI role (system, user, assistant).
type Message struct {
	Role    string
	Content string
}

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
	Messages []Message
	// Conversation is every turn of a multi-turn row when the reader was
	// asked for whole conversations (Options.Conversations), assistant turns
	// as empty placeholders for the model's own answers; nil otherwise, and
	// for the shapes that hold a single prompt.
	Conversation []Message
	// Source is the row's source/category column, when it has one.
	Source string
	// Location is "file:line" (JSONL) or "file:row N" (Parquet, JSON array),
	// for messages about this row.
	Location string
}
