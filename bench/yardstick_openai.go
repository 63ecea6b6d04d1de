package main

// The go-openai yardstick: the minimal loop a user of go-openai writes, the
// floor the plain figures were measured against. N goroutines call
// CreateChatCompletion (or CreateChatCompletionStream and Recv to the end)
// with row i's prompt and keep nothing. Its HTTP client keeps a connection
// per request in flight, as the bare loop's and synthgen's do: go-openai's
// default client keeps two idle connections a host, and a loop on it spends
// its time opening connections, not in the library.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// chatPath is what the yardstick's -url ends with; go-openai is given the
// base URL before it.
const chatPath = "/chat/completions"

// openaiExchanger sends one request with go-openai and returns the chunks
// it received (0 for a plain answer).
type openaiExchanger struct {
	client    *openai.Client
	model     string
	maxTokens int
	stream    bool
}

func newOpenAIExchanger(url, model string, maxTokens int, stream bool, hc *http.Client) (*openaiExchanger, error) {
	base, ok := strings.CutSuffix(url, chatPath)
	if !ok {
		return nil, fmt.Errorf("yardstick: -client go-openai needs -url ending in %s, got %q", chatPath, url)
	}
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = base
	cfg.HTTPClient = hc
	return &openaiExchanger{client: openai.NewClientWithConfig(cfg), model: model, maxTokens: maxTokens, stream: stream}, nil
}

func (o *openaiExchanger) exchange(ctx context.Context, prompt string) (int64, error) {
	req := openai.ChatCompletionRequest{
		Model:    o.model,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: prompt}},
		// max_tokens, as synthgen sends it: the loop asks what synthgen asks.
		MaxTokens: o.maxTokens, //lint:ignore SA1019 vLLM and the mock read max_tokens; this is the yardstick of synthgen's request
	}
	if !o.stream {
		_, err := o.client.CreateChatCompletion(ctx, req)
		return 0, err
	}
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	s, err := o.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var k int64
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return k, nil
		}
		if err != nil {
			return k, err
		}
		k++
	}
}
