// Package toolong reads a server's refusal of a prompt too long for the
// model's context: vLLM's and SGLang's sentences, llama.cpp's error fields,
// and the sizes they give.
package toolong

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Sizes are the sizes a server gave when it refused a prompt that
// cannot fit the model's context. A size the message did not give is 0.
type Sizes struct {
	Context    int // the model's context, vLLM's max_model_len
	Requested  int // prompt plus completion
	Prompt     int // prompt tokens (vLLM may say "at least")
	Completion int // max_tokens asked for
}

// String is the sizes as a person reads them, leaving out those unknown.
func (z Sizes) String() string {
	var parts []string
	if z.Context > 0 {
		parts = append(parts, fmt.Sprintf("max_model_len %d", z.Context))
	}
	if z.Requested > 0 {
		parts = append(parts, fmt.Sprintf("requested %d", z.Requested))
	}
	if z.Prompt > 0 {
		parts = append(parts, fmt.Sprintf("prompt %d", z.Prompt))
	}
	if z.Completion > 0 {
		parts = append(parts, fmt.Sprintf("completion %d", z.Completion))
	}
	return strings.Join(parts, ", ")
}

// The spellings of vLLM's refusal, oldest first (each a 400):
//
//	"This model's maximum context length is 4096 tokens. However, you
//	requested 5000 tokens (4000 in the messages, 1000 in the completion).
//	Please reduce the length of the messages or completion."
//	"This model's maximum context length is 4096 tokens. However, your
//	request has 4176 input tokens. Please reduce the length of the input
//	messages."
//	"'max_tokens' or 'max_completion_tokens' is too large: 1000. This
//	model's maximum context length is 4096 tokens and your request has 3500
//	input tokens (1000 > 4096 - 3500)."
//	"This model's maximum context length is 4096 tokens. However, you
//	requested 1000 output tokens and your prompt contains at least 4000
//	input tokens, for a total of at least 5000 tokens. Please reduce the
//	length of the input prompt or the number of requested output tokens."
//	"The decoder prompt (length 5000) is longer than the maximum model
//	length of 4096."
var (
	reContext       = regexp.MustCompile(`maximum context length is (\d+) tokens`)
	reClassic       = regexp.MustCompile(`requested (\d+) tokens \((\d+) in the (?:messages|prompt), (\d+) in the completion\)`)
	reClassicPrompt = regexp.MustCompile(`requested (\d+) tokens in the (?:messages|prompt)`)
	reInputOnly     = regexp.MustCompile(`your (?:request|prompt) has (\d+) input tokens`)
	reTooLarge      = regexp.MustCompile(`is too large: (\d+)\.`)
	reOutputPrompt  = regexp.MustCompile(`requested (\d+) output tokens and your prompt contains (?:at least )?(\d+) input tokens, for a total of (?:at least )?(\d+) tokens`)
	reDecoder       = regexp.MustCompile(`prompt \(length (\d+)\) is longer than the maximum model length of (\d+)`)
)

// Parse reports whether msg is a server's refusal of a prompt too
// long for the model's context, with the sizes it gives.
func Parse(msg string) (Sizes, bool) {
	var z Sizes
	if m := reDecoder.FindStringSubmatch(msg); m != nil {
		z.Prompt, z.Context = atoi(m[1]), atoi(m[2])
		return z, true
	}
	m := reContext.FindStringSubmatch(msg)
	if m == nil {
		return z, false
	}
	z.Context = atoi(m[1])
	switch {
	case reOutputPrompt.MatchString(msg):
		m := reOutputPrompt.FindStringSubmatch(msg)
		z.Completion, z.Prompt, z.Requested = atoi(m[1]), atoi(m[2]), atoi(m[3])
	case reClassic.MatchString(msg):
		m := reClassic.FindStringSubmatch(msg)
		z.Requested, z.Prompt, z.Completion = atoi(m[1]), atoi(m[2]), atoi(m[3])
	case reClassicPrompt.MatchString(msg):
		m := reClassicPrompt.FindStringSubmatch(msg)
		z.Requested, z.Prompt = atoi(m[1]), atoi(m[1])
	case reInputOnly.MatchString(msg):
		z.Prompt = atoi(reInputOnly.FindStringSubmatch(msg)[1])
		if t := reTooLarge.FindStringSubmatch(msg); t != nil {
			z.Completion = atoi(t[1])
			z.Requested = z.Prompt + z.Completion
		}
	}
	return z, true
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// ParseBody reads llama.cpp's refusal of a prompt longer than its
// context from the fields of the error object.
func ParseBody(body []byte) (Sizes, bool) {
	var le struct {
		Error struct {
			Type          string `json:"type"`
			NPromptTokens int    `json:"n_prompt_tokens"`
			NCtx          int    `json:"n_ctx"`
		} `json:"error"`
	}
	if len(body) == 0 || json.Unmarshal(body, &le) != nil || le.Error.Type != "exceed_context_size_error" {
		return Sizes{}, false
	}
	return Sizes{Context: le.Error.NCtx, Prompt: le.Error.NPromptTokens}, true
}
