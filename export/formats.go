package export

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/synthgen/synthgen/sink"
)

// Export formats: the names are an interface (`synthgen export --format`).
const (
	FormatSpecForge   = "specforge"
	FormatShareGPT    = "sharegpt"
	FormatMessages    = "messages"
	FormatOpenAIBatch = "openai-batch"
	FormatSpeculators = "speculators"
	// FormatSpeculatorsHidden is speculators' offline training directory:
	// the speculators rows as its trainer loads them, and each row's
	// hidden states beside them (speculatorshidden.go).
	FormatSpeculatorsHidden = "speculators-hidden"
)

// Formats lists the export formats.
var Formats = []string{FormatSpecForge, FormatShareGPT, FormatMessages, FormatOpenAIBatch, FormatSpeculators, FormatSpeculatorsHidden}

// specforgeRow is one line of SpecForge's conversation format as its
// scripts/regenerate_train_data.py writes a regenerated row (with
// --reasoning save): {"id", "conversations": [{"role", "content"}, ...,
// {"role": "assistant", "content", "reasoning_content"}], "status":
// "success"}. Its scripts/validate_regenerated_data.py refuses a row
// whose status is not "success"; the training loader reads only id,
// conversations and tools. With tools, the turns are OpenAI's, as the
// messages format writes them (tools.go).
type specforgeRow struct {
	ID            string        `json:"id" parquet:"id"`
	Conversations []messageTurn `json:"conversations" parquet:"conversations,list"`
	Status        string        `json:"status" parquet:"status"`
	Tools         string        `json:"tools,omitempty" parquet:"tools,optional"`
}

// specforgeSuccess is the status of every exported row: a row is exported
// only when its request succeeded.
const specforgeSuccess = "success"

// messagesRow is OpenAI chat: {"id", "messages": [{"role", "content"}]},
// with the tools offered and the turns' tool calls when there were any
// (tools.go).
type messagesRow struct {
	ID       string        `json:"id" parquet:"id"`
	Messages []messageTurn `json:"messages" parquet:"messages,list"`
	Tools    string        `json:"tools,omitempty" parquet:"tools,optional"`
}

// fromTurn is a ShareGPT turn: from system, human or gpt, and with tools
// function_call or observation (tools.go).
type fromTurn struct {
	From             string `json:"from" parquet:"from"`
	Value            string `json:"value" parquet:"value"`
	ReasoningContent string `json:"reasoning_content,omitempty" parquet:"reasoning_content,optional"`
}

type sharegptRow struct {
	ID            string     `json:"id" parquet:"id"`
	Conversations []fromTurn `json:"conversations" parquet:"conversations,list"`
	Tools         string     `json:"tools,omitempty" parquet:"tools,optional"`
}

// sharegptFrom maps a chat role to ShareGPT's speaker; tool turns and an
// assistant's calls are tools.go's.
var sharegptFrom = map[string]string{"system": "system", "user": "human", "assistant": "gpt"}

// messageTurns are a record's conversation as OpenAI chat turns, the
// reasoning placed as mode says.
func messageTurns(rec *sink.Record, mode string) []messageTurn {
	conv := Conversation(rec)
	out := make([]messageTurn, len(conv))
	for i, t := range conv {
		content, reasoning := placeReasoning(t, mode)
		out[i] = messageTurn{Role: t.Role, Content: content, ReasoningContent: reasoning, ToolCalls: t.ToolCalls, ToolCallID: t.ToolCallID}
	}
	return out
}

// specforgeOf is a record as a SpecForge row. Which SpecForge chat
// templates read reasoning_content and which need it inline in content is
// in docs/training-data.md ("SpecForge's templates and reasoning").
func specforgeOf(rec *sink.Record, mode string) specforgeRow {
	return specforgeRow{ID: rec.ID, Conversations: messageTurns(rec, mode), Status: specforgeSuccess, Tools: rec.Tools}
}

func messagesOf(rec *sink.Record, mode string) messagesRow {
	return messagesRow{ID: rec.ID, Messages: messageTurns(rec, mode), Tools: rec.Tools}
}

func sharegptOf(rec *sink.Record, mode string) sharegptRow {
	return sharegptRow{ID: rec.ID, Conversations: sharegptTurns(Conversation(rec), mode), Tools: rec.Tools}
}

// batchLine is one line of an OpenAI Batch API output file (and of vLLM's
// run_batch output): a response, or an error with response null.
type batchLine struct {
	ID       string         `json:"id"`
	CustomID string         `json:"custom_id"`
	Response *batchResponse `json:"response"`
	Error    *batchError    `json:"error"`
}

type batchResponse struct {
	StatusCode int            `json:"status_code"`
	RequestID  string         `json:"request_id"`
	Body       chatCompletion `json:"body"`
}

type batchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

// chatMessage is the answer; reasoning_content is null when the model gave
// none, as vLLM writes it.
type chatMessage struct {
	Role             string  `json:"role"`
	Content          string  `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// keyTag is a short stable hash of a key: the batch line's ids derive from
// it, so the same directory exports to the same bytes.
func keyTag(id string, sample int) string {
	h := sha256.Sum256([]byte(strconv.Itoa(sample) + ":" + id))
	return hex.EncodeToString(h[:12])
}

// batchOf is a record as a batch output line. custom_id is the record id;
// with generation.n > 1 the samples of one id share it and differ by the
// choice index, which is the sample (as the choices of one request with n
// would).
func batchOf(rec *sink.Record, _ string) batchLine {
	tag := keyTag(rec.ID, rec.Sample)
	conv := Conversation(rec)
	answer := conv[len(conv)-1]
	var reasoning *string
	if answer.Reasoning != "" {
		reasoning = &answer.Reasoning
	}
	return batchLine{
		ID:       "batch_req_" + tag,
		CustomID: rec.ID,
		Response: &batchResponse{
			StatusCode: 200,
			RequestID:  "req_" + tag,
			Body: chatCompletion{
				ID: "chatcmpl-" + tag, Object: "chat.completion", Created: rec.CreatedAt.Unix(), Model: rec.Model,
				Choices: []chatChoice{{
					Index:        rec.Sample,
					Message:      chatMessage{Role: answer.Role, Content: answer.Content, ReasoningContent: reasoning},
					FinishReason: rec.FinishReason,
				}},
				Usage: chatUsage{PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens,
					TotalTokens: rec.PromptTokens + rec.CompletionTokens},
			},
		},
	}
}

// batchErrorOf is a request that failed for good, as a batch error line.
func batchErrorOf(e *sink.ErrorRecord) batchLine {
	code := e.Cause
	if code == "" {
		code = "unknown"
	}
	msg := e.Message
	if e.Status != 0 {
		msg = fmt.Sprintf("HTTP %d: %s", e.Status, msg)
	}
	return batchLine{ID: "batch_req_" + keyTag(e.ID, e.Sample), CustomID: e.ID, Error: &batchError{Code: code, Message: msg}}
}
