package mockserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// chatRequest is the part of an OpenAI chat completion request the mock
// reads. Unknown fields (top_p, top_k, chat_template_kwargs, ...) are
// accepted and ignored, as vLLM does for sampling knobs it does not need here.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Temperature         *float64       `json:"temperature"`
	N                   *int           `json:"n"`
	// The shape asked of the content (schema.go): OpenAI's
	// response_format, older vLLM's guided_json, newer vLLM's
	// structured_outputs.
	ResponseFormat    json.RawMessage `json:"response_format"`
	GuidedJSON        json.RawMessage `json:"guided_json"`
	StructuredOutputs json.RawMessage `json:"structured_outputs"`
	toolFields                        // tools.go
	tokenids.Fields                   // return_token_ids, logprobs
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role    string         `json:"role"`
	Content messageContent `json:"content"`
}

// messageContent is a message's text: OpenAI sends either a string or an
// array of parts ({"type":"text","text":...}); both reduce to the text.
type messageContent string

func (c *messageContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = messageContent(s)
		return nil
	case b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		var sb []byte
		for i, p := range parts {
			if i > 0 {
				sb = append(sb, '\n')
			}
			sb = append(sb, p.Text...)
		}
		*c = messageContent(sb)
		return nil
	default:
		return errors.New("content: want a string, null or an array of parts")
	}
}

// maxTokenLimit is the cap applied when a request sets no max_tokens: a
// stand-in for a model's context length.
const maxTokenLimit = 1 << 17

// parseRequest decodes and validates a chat completion body. Its errors name
// the offending field; they become vLLM-shaped 400 answers.
func parseRequest(body []byte) (chatRequest, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return req, fmt.Errorf("invalid JSON body at byte %d: %w", se.Offset, err)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			// Name the field in the request's terms, not the decoder's Go types.
			return req, fmt.Errorf("%s: unexpected JSON %s at byte %d", te.Field, te.Value, te.Offset)
		}
		return req, fmt.Errorf("invalid request body: %w", err)
	}
	if req.Messages == nil {
		return req, errors.New("messages: field required")
	}
	if len(req.Messages) == 0 {
		return req, errors.New("messages: at least one message is required")
	}
	for i, m := range req.Messages {
		if m.Role == "" {
			return req, fmt.Errorf("messages[%d].role: field required", i)
		}
	}
	if req.MaxTokens != nil && *req.MaxTokens < 1 {
		return req, fmt.Errorf("max_tokens: must be at least 1, got %d", *req.MaxTokens)
	}
	if req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 1 {
		return req, fmt.Errorf("max_completion_tokens: must be at least 1, got %d", *req.MaxCompletionTokens)
	}
	if req.Temperature != nil && *req.Temperature < 0 {
		return req, fmt.Errorf("temperature: must be non-negative, got %s", strconv.FormatFloat(*req.Temperature, 'g', -1, 64))
	}
	if err := req.Fields.Check(); err != nil {
		return req, err
	}
	return req, nil
}

// limit is the request's completion token budget: max_completion_tokens wins
// over max_tokens, as in vLLM.
func (r *chatRequest) limit() int {
	switch {
	case r.MaxCompletionTokens != nil:
		return min(*r.MaxCompletionTokens, maxTokenLimit)
	case r.MaxTokens != nil:
		return min(*r.MaxTokens, maxTokenLimit)
	}
	return maxTokenLimit
}

// includeUsage reports whether a stream ends with a usage chunk.
func (r *chatRequest) includeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// promptHash identifies the conversation: the answer to a request is a pure
// function of it and the seed, so a retried or resumed request gets the same
// answer. Roles and texts are separated by a byte no text contains.
func (r *chatRequest) promptHash() uint64 {
	h := uint64(fnvOffset)
	for _, m := range r.Messages {
		h = fnvString(h, m.Role)
		h = fnvString(h, string(m.Content))
	}
	return h
}

// FNV-1a, written out so hashing a prompt allocates nothing.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString hashes s followed by a zero byte, so ("ab","c") and ("a","bc")
// differ.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h *= fnvPrime // the zero separator: h ^= 0 is a no-op
	return h
}

// contents are the messages' texts, in order.
func (r *chatRequest) contents() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, m := range r.Messages {
			if !yield(string(m.Content)) {
				return
			}
		}
	}
}

// promptTokens approximates the prompt's length in tokens by its words.
func (r *chatRequest) promptTokens() int {
	n := 0
	for _, m := range r.Messages {
		n += countWords(string(m.Content))
	}
	return max(n, 1)
}

func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		space := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// contextRefusal is vLLM's refusal of a request whose prompt plus max_tokens exceed
// the model's context (Options.MaxModelLen), in the current spelling
// (vllm/renderers/params.py); false when it fits or no limit is set. A
// request without max_tokens asks for what is left of the context, so only
// its prompt must fit.
func (s *Server) contextRefusal(req *chatRequest) (string, bool) {
	n := s.opts.MaxModelLen
	if n <= 0 {
		return "", false
	}
	prompt, out := req.promptTokens(), 0
	if req.MaxTokens != nil || req.MaxCompletionTokens != nil {
		out = req.limit()
	}
	if prompt+out <= n {
		return "", false
	}
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d output tokens and your prompt contains %d input tokens, for a total of %d tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
		n, out, prompt, prompt+out), true
}
