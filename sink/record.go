// Package sink owns synthgen's output directory: the record type, the part
// files (JSONL and Parquet), the errors directory, the manifest, and the
// recovery pass that makes a resumed run skip exactly the keys already on disk.
package sink

import (
	"strings"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink/keyset"
)

// Record is one answer: one row per (ID, Sample) in every output format.
// Field names and types are an interface (docs/reference.md, "The record"): users'
// scripts read them, so they change only with that page. Messages are the
// turns as they were sent to the server, an assistant turn's tool calls and
// a tool turn's call id as the row had them.
type Record struct {
	ID               string         `json:"id" parquet:"id"`
	Sample           int            `json:"sample" parquet:"sample"`
	Source           string         `json:"source" parquet:"source"`
	Messages         []chat.Message `json:"messages" parquet:"messages,list"`
	Reasoning        string         `json:"reasoning" parquet:"reasoning"`
	Content          string         `json:"content" parquet:"content"`
	FinishReason     string         `json:"finish_reason" parquet:"finish_reason"`
	Model            string         `json:"model" parquet:"model"`
	PromptTokens     int            `json:"prompt_tokens" parquet:"prompt_tokens"`
	CompletionTokens int            `json:"completion_tokens" parquet:"completion_tokens"`
	LatencyMS        float64        `json:"latency_ms" parquet:"latency_ms"`
	TTFTMS           float64        `json:"ttft_ms" parquet:"ttft_ms"`
	Attempts         int            `json:"attempts" parquet:"attempts"`
	CreatedAt        time.Time      `json:"created_at" parquet:"created_at,timestamp(millisecond)"`
	// The tokens, with generation.return_token_ids and generation.logprobs
	// (tokens.go): the ids the server tokenized the prompt into and those
	// it generated, whether their count disagrees with usage, and the
	// generated tokens' logprobs. With Turns, the last turn's.
	PromptTokenIDs   []int32   `json:"prompt_token_ids,omitempty" parquet:"prompt_token_ids,list"`
	TokenIDs         []int32   `json:"token_ids,omitempty" parquet:"token_ids,list"`
	TokenIDsMismatch string    `json:"token_ids_mismatch,omitempty" parquet:"token_ids_mismatch"`
	Logprobs         *Logprobs `json:"logprobs,omitempty" parquet:"logprobs,optional"`
	// CachedTokens are the prompt tokens the server served from its cache
	// (usage.prompt_tokens_details.cached_tokens), which hosted servers
	// bill cheaper: with them a record's cost can be reckoned again at
	// another price. Absent (0) when the server says nothing of it.
	CachedTokens int `json:"cached_tokens,omitempty" parquet:"cached_tokens"`
	// Cost is what this answer cost in USD at endpoint.price, from its
	// usage; absent (0) without a price.
	Cost float64 `json:"cost,omitempty" parquet:"cost"`
	// Turns holds every assistant turn of a whole conversation regenerated
	// by the model (generation.turns: all), in order; empty when the job
	// answers the first turn only. Messages is then what was sent for the
	// last turn (the model's own earlier answers in it, their reasoning held
	// back), Reasoning, Content and FinishReason are the last turn's, and
	// PromptTokens, CompletionTokens, CachedTokens, Cost and Attempts the
	// sums over the turns.
	Turns []Turn `json:"turns,omitempty" parquet:"turns,list"`
	// The tools (toolcalls.go): the tools list sent with the request, JSON
	// text as sent ("" none); the model's calls in the answer, as sent
	// (finish_reason tool_calls); how many of them have arguments that
	// are not valid JSON (kept as sent, never repaired).
	Tools            string          `json:"tools,omitempty" parquet:"tools,optional"`
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
	ToolCallsInvalid int             `json:"tool_calls_invalid,omitempty" parquet:"tool_calls_invalid,optional"`
	// Divergence is where a whole conversation with tools left the row's
	// path and ended there (generation.turns: all); nil when it followed
	// the row to its end.
	Divergence *Divergence `json:"divergence,omitempty" parquet:"divergence,optional"`
}

// The kinds of Divergence: how the target left the row's conversation.
const (
	// DivergedMoreCalls: the target called a tool where the row has no
	// cached result left to answer it with.
	DivergedMoreCalls = "more_calls_than_results"
	// DivergedParallelCalls: the target made several calls in one answer.
	DivergedParallelCalls = "parallel_calls"
	// DivergedUnknownTool: the target called a tool the row does not offer.
	DivergedUnknownTool = "unknown_tool"
	// DivergedAnswerForCall: the target answered in text where the row
	// called a tool.
	DivergedAnswerForCall = "answer_instead_of_call"
)

// Divergence is how and where a whole conversation left its row: Kind is
// one of the Diverged* constants, Turn the index in Record.Turns of the
// answer that diverged (the record's last), Detail what the target did
// (the tool it named, the number of calls).
type Divergence struct {
	Kind   string `json:"kind" parquet:"kind"`
	Turn   int    `json:"turn" parquet:"turn"`
	Detail string `json:"detail,omitempty" parquet:"detail,optional"`
}

// Turn is one answered turn of a whole conversation.
type Turn struct {
	Reasoning        string `json:"reasoning" parquet:"reasoning"`
	Content          string `json:"content" parquet:"content"`
	FinishReason     string `json:"finish_reason" parquet:"finish_reason"`
	PromptTokens     int    `json:"prompt_tokens" parquet:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens" parquet:"completion_tokens"`
	// The turn's tokens, as the record's (tokens.go): PromptTokenIDs are
	// what the server saw for this turn, the model's earlier answers in it.
	PromptTokenIDs   []int32   `json:"prompt_token_ids,omitempty" parquet:"prompt_token_ids,list"`
	TokenIDs         []int32   `json:"token_ids,omitempty" parquet:"token_ids,list"`
	TokenIDsMismatch string    `json:"token_ids_mismatch,omitempty" parquet:"token_ids_mismatch"`
	Logprobs         *Logprobs `json:"logprobs,omitempty" parquet:"logprobs,optional"`
	// The turn's tool calls, as the record's: the target's own, as sent;
	// the row's cached result for each follows it in Record.Messages.
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
	ToolCallsInvalid int             `json:"tool_calls_invalid,omitempty" parquet:"tool_calls_invalid,optional"`
}

// Key identifies a record: a prompt id and the sample number. Package
// sink/keyset defines it, as the sets that hold keys (and cannot import
// sink) need it; this is the name records and their readers use.
type Key = keyset.Key

// Key returns the record's key.
func (r *Record) Key() Key { return Key{ID: r.ID, Sample: r.Sample} }

// ErrorRecord is a request that used up its retries or was not retryable.
// It lives under DIR/errors/ and is superseded by a later success.
type ErrorRecord struct {
	ID        string    `json:"id"`
	Sample    int       `json:"sample"`
	Status    int       `json:"status"`  // HTTP status; 0 when none (connection error, cut stream)
	Message   string    `json:"message"` // the server's message, or the error text
	Attempts  int       `json:"attempts"`
	Cause     string    `json:"cause"` // short class: http_400, http_429, timeout, connection, stream_cut, ...
	CreatedAt time.Time `json:"created_at"`
}

// Key returns the error record's key.
func (e *ErrorRecord) Key() Key { return Key{ID: e.ID, Sample: e.Sample} }

// ThinkTags reports whether content holds a think tag (<think> or
// </think>): a reasoning model's thought that a server without a reasoning
// parser left inside the answer. Some chat templates open the tag in the
// prompt, so the closing tag alone counts too.
func ThinkTags(content string) bool {
	return strings.Contains(content, "</think>") || strings.Contains(content, "<think>")
}

// ReasoningInContent reports whether r looks answered by such a server: no
// reasoning, and think tags in the content.
func (r *Record) ReasoningInContent() bool { return r.Reasoning == "" && ThinkTags(r.Content) }
