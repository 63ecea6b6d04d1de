package shape

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset/internal/number"
	"github.com/synthgen/synthgen/dataset/template"
)

// A row is one decoded dataset row: JSON objects decode into it with
// json.Number for numbers, Parquet rows with int64/float64, and both give
// lists as []any and structs as map[string]any. One Converter for both keeps
// the JSON and Parquet readers in agreement about what a prompt is.
type row = map[string]any

// The row shapes dataset.Options.Format names.
const (
	FormatAuto     = "auto"
	FormatShareGPT = "sharegpt"
	FormatMessages = "messages"
	FormatPrompt   = "prompt"
	FormatAlpaca   = "alpaca"
	// FormatOpenAIBatch is a line of an OpenAI batch input file (what
	// `vllm run-batch` reads): a custom_id and a chat completion body.
	FormatOpenAIBatch = "openai-batch"
	// FormatRows is the row shape of a templated job: the row is a bag of
	// fields, and prompt.messages (Converter.Template) makes the prompt of
	// them. With a template, auto means rows.
	FormatRows = "rows"
)

// Converter turns rows into prompt parts; it holds the resolved options.
type Converter struct {
	ParamsField string // dataset.params_field: the row's own request fields; "" none
	Format      string
	PromptField string // "" in auto mode: "prompt"
	IDField     string
	SourceField string
	Template    *template.Template // prompt.messages: the messages are rendered from the row (format rows)
}

// Convert fills p with the conversation to send, the row's id (when an id
// field is set, or the row names its own: a batch row's custom_id), its
// source and a request row's own parameters, or returns the field that makes
// the row bad.
func (c *Converter) Convert(r row, p *Row) *FieldError {
	var (
		msgs []chat.Message
		id   string
		fe   *FieldError
	)
	if c.IDField != "" {
		if id, fe = ID(r, c.IDField); fe != nil {
			return fe
		}
	}
	switch c.shape(r) {
	case FormatOpenAIBatch:
		if c.IDField == "" {
			if id, fe = ID(r, "custom_id"); fe != nil {
				return fe
			}
		}
		msgs, fe = batchRequest(r, p)
	case FormatShareGPT:
		msgs, fe = turns(r, "conversations", "from", "value", false)
		p.Hint = answerSize(r, "conversations", "from", "value", false)
	case FormatMessages:
		msgs, fe = turns(r, "messages", "role", "content", false)
		p.Hint = answerSize(r, "messages", "role", "content", false)
	case FormatPrompt:
		msgs, fe = promptColumn(r, c.promptFieldName())
	case FormatAlpaca:
		msgs, fe = alpaca(r)
	case FormatRows:
		msgs, fe = rendered(c.Template, r)
	default:
		fe = fieldErr("", ErrUnknownShape)
	}
	if fe != nil {
		return fe
	}
	if c.shape(r) != FormatOpenAIBatch {
		if fe := c.rowParams(r, p); fe != nil {
			return fe
		}
		if c.shape(r) != FormatRows {
			// A tools column beside the turns (messages, ShareGPT) or
			// the prompt (xlam's query and tools, as prompt rows); a
			// templated job's columns are the template's to read.
			if p.Tools, fe = Tools(r["tools"], "tools"); fe != nil {
				return fe
			}
			if p.Tools != "" {
				if fe := toolChoice(r, p); fe != nil {
					return fe
				}
			}
		}
	}
	p.Messages, p.ID, p.Source = msgs, id, scalarString(r[c.SourceField])
	return nil
}

// rowParams reads the dataset.params_field column: an object of the row's
// own request fields (temperature, max_tokens, seed, ...), which replace
// the job's for that row as a batch row's body does. Absent or null: none.
func (c *Converter) rowParams(r row, p *Row) *FieldError {
	if c.ParamsField == "" {
		return nil
	}
	v, ok := r[c.ParamsField]
	if !ok || v == nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fieldErr(c.ParamsField, ErrNotObject)
	}
	if _, has := obj["messages"]; has {
		return fieldErr(c.ParamsField+".messages", errors.New("the prompt comes from the row's shape, not from its request fields"))
	}
	return requestParams(obj, c.ParamsField, p)
}

func (c *Converter) promptFieldName() string {
	if c.PromptField == "" {
		return "prompt"
	}
	return c.PromptField
}

// shape is the forced format, or the first shape whose field the row has (a
// null column counts as absent: merged Parquet datasets carry every shape's
// columns with nulls).
func (c *Converter) shape(r row) string {
	if c.Format != FormatAuto {
		return c.Format
	}
	switch {
	case r["custom_id"] != nil && r["body"] != nil:
		return FormatOpenAIBatch
	case r["conversations"] != nil:
		return FormatShareGPT
	case r["messages"] != nil:
		return FormatMessages
	case r[c.promptFieldName()] != nil:
		return FormatPrompt
	case r["instruction"] != nil:
		return FormatAlpaca
	}
	return ""
}

// roles maps ShareGPT "from" and OpenAI "role" values to OpenAI roles.
var roles = map[string]string{
	"human":     "user",
	"user":      "user",
	"gpt":       "assistant",
	"assistant": "assistant",
	"model":     "assistant",
	"system":    "system",
	"developer": "system", // OpenAI's newer name; chat templates know only system
	"tool":      "tool",
	// function_call and observation turns (LLaMA-Factory's) are rewritten
	// before roles are read: sharegpt_tools.go.
}

// Conversation reads every turn of a multi-turn row, assistant turns
// included (their content is left empty: a job that regenerates whole
// conversations replaces them with the model's own answers); nil for the
// shapes that hold a single prompt.
func (c *Converter) Conversation(r row) ([]chat.Message, *FieldError) {
	switch c.shape(r) {
	case FormatShareGPT:
		return turns(r, "conversations", "from", "value", true)
	case FormatMessages:
		return turns(r, "messages", "role", "content", true)
	}
	return nil, nil
}

// turns reads a list of turns: those before the first assistant turn, or
// with whole every turn, assistant turns as empty placeholders. Each turn
// may be {from, value} or {role, content} whatever the list is called,
// because datasets mix them; errors name the keys the turn used.
//
// With whole, assistant turns in a row (no user or system turn between
// them: a reply split in two, as scraped chats have) are one placeholder:
// the model answers once where they stand. Asked once more, the second
// answer would follow the model's own turn with nothing new to answer, a
// conversation no chat (and no draft model trained on the data) sees.
func turns(r row, list, roleKey, contentKey string, whole bool) ([]chat.Message, *FieldError) {
	items, fe := turnList(r[list], list)
	if fe != nil {
		return nil, fe
	}
	if items, fe = functionTurns(items, list, roleKey); fe != nil { // sharegpt_tools.go
		return nil, fe
	}
	msgs := make([]chat.Message, 0, 2)
	hasUser := false
	for i, it := range items {
		at := func(key string) string { return list + "[" + strconv.Itoa(i) + "]" + dot(key) }
		turn, ok := it.(map[string]any)
		if !ok {
			return nil, fieldErr(at(""), ErrNotObject)
		}
		rk, ck := roleKey, contentKey
		if _, has := turn[rk]; !has {
			if _, alt := turn[altRoleKey(rk)]; alt {
				rk, ck = altRoleKey(rk), altContentKey(ck)
			}
		}
		name, fe := stringField(turn, rk, at(rk))
		if fe != nil {
			return nil, fe
		}
		role, known := roles[strings.ToLower(name)]
		if !known {
			return nil, fieldErr(at(rk), fmt.Errorf("unknown role %q", name))
		}
		if role == "assistant" {
			if !whole {
				break
			}
			if msgs, fe = placeholder(msgs, turn, hasUser, at(rk), at("tool_calls")); fe != nil {
				return nil, fe
			}
			continue
		}
		if role == "tool" && whole {
			if n := len(msgs); n == 0 || (msgs[n-1].Role != "assistant" && msgs[n-1].Role != "tool") {
				return nil, fieldErr(at(rk), ErrToolNoCall)
			}
		}
		content, fe := contentOf(turn[ck], at(ck), ck == "content")
		if fe != nil {
			return nil, fe
		}
		if role == "system" && content == "" {
			// Many ShareGPT exports carry an empty system turn; sending it
			// would only change the chat template's default.
			continue
		}
		if role == "user" {
			if strings.TrimSpace(content) == "" {
				return nil, fieldErr(at(ck), ErrEmpty)
			}
			hasUser = true
		}
		m := chat.Message{Role: role, Content: content}
		if role == "tool" {
			if m.ToolCallID, fe = optionalString(turn, "tool_call_id", at("tool_call_id")); fe != nil {
				return nil, fe
			}
		}
		msgs = append(msgs, m)
	}
	if !hasUser {
		return nil, fieldErr(list, ErrNoUserTurn)
	}
	return msgs, nil
}

// placeholder appends an assistant turn of a whole conversation to msgs:
// an empty placeholder for the model's own answer that keeps the row's
// tool calls there (a regenerated conversation asks whether the model
// calls where the row did; the calls themselves are never sent). Assistant
// turns in a row are one placeholder, their calls together.
func placeholder(msgs []chat.Message, turn map[string]any, hasUser bool, roleAt, callsAt string) ([]chat.Message, *FieldError) {
	if !hasUser {
		// An answer with no question before it: nothing to ask.
		return nil, fieldErr(roleAt, ErrNoUserTurn)
	}
	calls, fe := toolCalls(turn["tool_calls"], callsAt)
	if fe != nil {
		return nil, fe
	}
	if n := len(msgs); msgs[n-1].Role == "assistant" {
		msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, calls...)
		return msgs, nil
	}
	return append(msgs, chat.Message{Role: "assistant", ToolCalls: calls}), nil
}

// turnList is a list of turns, present and not empty.
func turnList(v any, field string) ([]any, *FieldError) {
	if v == nil {
		return nil, fieldErr(field, ErrMissing)
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fieldErr(field, ErrNotList)
	}
	if len(items) == 0 {
		return nil, fieldErr(field, ErrEmpty)
	}
	return items, nil
}

func dot(key string) string {
	if key == "" {
		return ""
	}
	return "." + key
}

func altRoleKey(k string) string {
	if k == "from" {
		return "role"
	}
	return "from"
}

func altContentKey(k string) string {
	if k == "value" {
		return "content"
	}
	return "value"
}

// contentOf reads a turn's content: a string, or (for OpenAI's "content",
// when parts are allowed) a list of parts of which only text parts can be sent
// by a text-only job. Parts are joined with "\n" as vLLM joins them.
func contentOf(v any, field string, parts bool) (string, *FieldError) {
	switch c := v.(type) {
	case nil:
		return "", fieldErr(field, ErrMissing)
	case string:
		return c, nil
	case []byte:
		return string(c), nil
	case []any:
		if !parts {
			break
		}
		var b strings.Builder
		for i, p := range c {
			at := field + "[" + strconv.Itoa(i) + "]"
			part, ok := p.(map[string]any)
			if !ok {
				return "", fieldErr(at, ErrNotObject)
			}
			if t, has := part["type"]; has && t != "text" {
				return "", fieldErr(at+".type", fmt.Errorf("unsupported content part %v", t))
			}
			text, fe := stringField(part, "text", at+".text")
			if fe != nil {
				return "", fe
			}
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(text)
		}
		return b.String(), nil
	}
	return "", fieldErr(field, ErrNotString)
}

func promptColumn(r row, field string) ([]chat.Message, *FieldError) {
	s, fe := stringField(r, field, field)
	if fe != nil {
		return nil, fe
	}
	if strings.TrimSpace(s) == "" {
		return nil, fieldErr(field, ErrEmpty)
	}
	return []chat.Message{{Role: "user", Content: s}}, nil
}

// alpaca makes one user turn of instruction and, when present, input.
func alpaca(r row) ([]chat.Message, *FieldError) {
	inst, fe := stringField(r, "instruction", "instruction")
	if fe != nil {
		return nil, fe
	}
	if strings.TrimSpace(inst) == "" {
		return nil, fieldErr("instruction", ErrEmpty)
	}
	if v := r["input"]; v != nil {
		in, ok := asString(v)
		if !ok {
			return nil, fieldErr("input", ErrNotString)
		}
		if strings.TrimSpace(in) != "" {
			inst += "\n\n" + in
		}
	}
	return []chat.Message{{Role: "user", Content: inst}}, nil
}

func stringField(m map[string]any, key, field string) (string, *FieldError) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", fieldErr(field, ErrMissing)
	}
	s, ok := asString(v)
	if !ok {
		return "", fieldErr(field, ErrNotString)
	}
	return s, nil
}

func asString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte: // BYTE_ARRAY columns written without the STRING annotation
		return string(s), true
	}
	return "", false
}

// ID reads the id column: a non-empty string, or a number in plain decimal
// so that 1e3 and 1000 name the same row.
func ID(r row, field string) (string, *FieldError) {
	v := r[field]
	if v == nil {
		return "", fieldErr(field, ErrMissing)
	}
	if s, ok := asString(v); ok {
		if s == "" {
			return "", fieldErr(field, ErrEmpty)
		}
		return s, nil
	}
	if s, ok := number.Decimal(v); ok {
		return s, nil
	}
	return "", fieldErr(field, fmt.Errorf("not a string or number"))
}

// scalarString is the source column as text; a column of another type (a
// struct, a list) is not a source and yields "" rather than failing every row.
func scalarString(v any) string {
	if s, ok := asString(v); ok {
		return s
	}
	if s, ok := number.Decimal(v); ok {
		return s
	}
	if b, ok := v.(bool); ok {
		return strconv.FormatBool(b)
	}
	return ""
}

// rendered is the messages tmpl makes of row r, or the field that makes it
// a bad row.
func rendered(tmpl *template.Template, r row) ([]chat.Message, *FieldError) {
	turns, fe := tmpl.Render(r)
	if fe != nil {
		return nil, fieldErr(fe.Field, fe.Err)
	}
	return turns, nil
}
