// Package shape turns a decoded dataset row into the conversation to send,
// by its row shape: ShareGPT conversations, OpenAI messages, a prompt
// column, Alpaca, an OpenAI batch request line, or a row of its own fields
// made a prompt by prompt.messages (package dataset/template). It reads
// rows, not files: package dataset decodes them and says where each is.
package shape

import (
	"errors"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset/template"
)

// Row is what a row's shape makes of it (dataset.Prompt holds each).
type Row struct {
	// ID is the id the row names (its id field, a batch row's custom_id);
	// "" when it names none.
	ID       string
	Messages []chat.Message
	Source   string
	// Tools is the row's tools list as sent, JSON text ("" none): tools.go.
	Tools string
	// Params, Ignored and Model are a request row's own request fields,
	// the ones synthgen decides for itself, and the model it names.
	Params  map[string]any
	Ignored []string
	Model   string
	// Hint is the size (bytes of content) of the row's own first
	// assistant turn, the answer a first-turn job regenerates (0 none):
	// the producer starts long answers first. Converter.WholeHint is the
	// whole conversation's.
	Hint int
}

// FieldError is what makes a row bad: the path of its field ("" for the
// row as a whole) and the reason; one type with a template's, which a row's
// turns may fail with as well.
type FieldError = template.FieldError

func fieldErr(field string, err error) *FieldError { return &FieldError{Field: field, Err: err} }

// The reasons a field is bad. They are values so tests and callers can match
// them with errors.Is.
var (
	ErrMissing      = template.ErrMissing // one value: a field a template reads is a row's field
	ErrNotString    = errors.New("not a string")
	ErrNotList      = errors.New("not a list")
	ErrNotObject    = errors.New("not an object")
	ErrEmpty        = errors.New("empty")
	ErrNoUserTurn   = errors.New("no user turn before the first assistant turn")
	ErrToolNoCall   = errors.New("a tool result with no assistant turn before it")
	ErrUnknownShape = errors.New("no conversations, messages, prompt, instruction, or custom_id and body field")
	ErrNotText      = errors.New("not text")
	// ErrEndsWithAnswer: a request row whose last turn is an assistant
	// turn, without body.continue_final_message (vLLM's prefill).
	ErrEndsWithAnswer = errors.New(`"assistant" is the last turn: the answer would follow the model's own turn; drop the turn to have it answered anew, or set body.continue_final_message: true to continue it`)
)
