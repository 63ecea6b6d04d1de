package config

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string // the whole message of the one error
	}{
		{"base_url scheme", func(c *Config) { c.Endpoint.BaseURL = "localhost:8000/v1" }, `endpoint.base_url: "localhost:8000/v1" is not an http:// or https:// URL`},
		{"base_url empty", func(c *Config) { c.Endpoint.BaseURL = "" }, `endpoint.base_url: "" is not an http:// or https:// URL`},
		{"base_url no host", func(c *Config) { c.Endpoint.BaseURL = "http:///v1" }, `endpoint.base_url: "http:///v1" has no host`},
		{"base_url unparsable", func(c *Config) { c.Endpoint.BaseURL = "http://[::1" }, `endpoint.base_url: "http://[::1" is not a URL: missing ']' in host`},
		{"metrics_url", func(c *Config) { c.Endpoint.MetricsURL = "ftp://gpu/metrics" }, `endpoint.metrics_url: "ftp://gpu/metrics" is not an http:// or https:// URL`},
		{"api key pasted as its env name", func(c *Config) { c.Endpoint.APIKeyEnv = "sk-abc123" }, `endpoint.api_key_env: must be the name of an environment variable (letters, digits, _), not the key itself`},
		{"timeout", func(c *Config) { c.Endpoint.Timeout = 0 }, `endpoint.timeout: 0s must be greater than 0`},
		{"max_requests_per_minute", func(c *Config) { c.Endpoint.MaxRequestsPerMinute = -1 }, `endpoint.max_requests_per_minute: -1 is negative (0: no limit)`},
		{"max_tokens_per_minute", func(c *Config) { c.Endpoint.MaxTokensPerMinute = -5 }, `endpoint.max_tokens_per_minute: -5 is negative (0: no limit)`},
		{"dataset format", func(c *Config) { c.Dataset.Format = "csv" }, `dataset.format: "csv" is not one of auto, sharegpt, messages, prompt, alpaca, openai-batch, rows`},
		{"prompt field", func(c *Config) { c.Dataset.Format = "prompt" }, `dataset.prompt_field: required when dataset.format is "prompt"`},
		{"limit", func(c *Config) { c.Dataset.Limit = -1 }, `dataset.limit: -1 is less than 0`},
		{"on_bad_row", func(c *Config) { c.Dataset.OnBadRow = "ignore" }, `dataset.on_bad_row: "ignore" is not one of skip, fail`},
		{"shard_by", func(c *Config) { c.Dataset.ShardBy = "bytes" }, `dataset.shard_by: "bytes" is not one of rows, files`},
		{"max_tokens", func(c *Config) { c.Generation.MaxTokens = 0 }, `generation.max_tokens: 0 is less than 1`},
		{"temperature negative", func(c *Config) { c.Generation.Temperature = -0.1 }, `generation.temperature: -0.1 must be a finite number at least 0`},
		{"temperature nan", func(c *Config) { c.Generation.Temperature = math.NaN() }, `generation.temperature: NaN must be a finite number at least 0`},
		{"top_p zero", func(c *Config) { c.Generation.TopP = 0 }, `generation.top_p: 0 is not greater than 0 and at most 1`},
		{"top_p above 1", func(c *Config) { c.Generation.TopP = 1.5 }, `generation.top_p: 1.5 is not greater than 0 and at most 1`},
		{"n", func(c *Config) { c.Generation.N = 0 }, `generation.n: 0 is less than 1`},
		{"extra_body owned field", func(c *Config) { c.Generation.ExtraBody = map[string]any{"messages": nil} }, `generation.extra_body: "messages" is set by the dataset; set it there`},
		{"extra_body not json", func(c *Config) { c.Generation.ExtraBody = map[string]any{"x": math.Inf(1)} }, `generation.extra_body: cannot be sent as JSON: json: unsupported value: +Inf`},
		{"logprobs above 20", func(c *Config) { c.Generation.ReturnTokenIDs = true; c.Generation.Logprobs = 21 }, `generation.logprobs: 21 is not between 0 (no logprobs) and 20`},
		{"logprobs negative", func(c *Config) { c.Generation.ReturnTokenIDs = true; c.Generation.Logprobs = -1 }, `generation.logprobs: -1 is not between 0 (no logprobs) and 20`},
		{"logprobs without ids", func(c *Config) { c.Generation.Logprobs = 5 }, `generation.logprobs: needs generation.return_token_ids: true (the logprobs are kept token by token beside token_ids)`},
		{"require_token_ids without ids", func(c *Config) { c.Generation.RequireTokenIDs = true }, `generation.require_token_ids: needs generation.return_token_ids: true (no ids are asked for, so none can be required)`},
		{"extra_body return_token_ids", func(c *Config) { c.Generation.ExtraBody = map[string]any{"return_token_ids": true} }, `generation.extra_body: "return_token_ids" is set by generation.return_token_ids; set it there`},
		{"extra_body top_logprobs", func(c *Config) { c.Generation.ExtraBody = map[string]any{"top_logprobs": 3} }, `generation.extra_body: "top_logprobs" is set by generation.logprobs; set it there`},
		{"concurrency", func(c *Config) { c.Concurrency = 0 }, `concurrency: 0 is less than 1`},
		{"max_attempts", func(c *Config) { c.Retry.MaxAttempts = 0 }, `retry.max_attempts: 0 is less than 1`},
		{"initial_backoff", func(c *Config) { c.Retry.InitialBackoff = -time.Second }, `retry.initial_backoff: -1s must be greater than 0`},
		{"max_backoff", func(c *Config) { c.Retry.MaxBackoff = 0; c.Retry.InitialBackoff = time.Second }, `retry.max_backoff: 0s must be greater than 0`},
		{"backoffs ordered", func(c *Config) { c.Retry.InitialBackoff = 2 * time.Minute }, `retry.initial_backoff: 2m0s is more than retry.max_backoff 1m0s`},
		{"output dir", func(c *Config) { c.Output.Dir = "" }, `output.dir: must not be empty`},
		{"output format", func(c *Config) { c.Output.Format = "csv" }, `output.format: "csv" is not one of jsonl, parquet`},
		{"shard_size", func(c *Config) { c.Output.ShardSize = 0 }, `output.shard_size: 0 is less than 1`},
		{"sync_interval", func(c *Config) { c.Output.SyncInterval = -time.Second }, `output.sync_interval: -1s is negative (0 means fsync every record)`},
		{"progress interval", func(c *Config) { c.Progress.Interval = 0 }, `progress.interval: 0s must be greater than 0`},
		{"grace", func(c *Config) { c.Shutdown.Grace = -time.Second }, `shutdown.grace: -1s is negative`},
		{"batch size", func(c *Config) { c.Batch.Enabled, c.Batch.MaxRequests = true, 0 }, `batch.max_requests: 0 is less than 1`},
		{"batch window", func(c *Config) { c.Batch.Enabled, c.Batch.CompletionWindow = true, "" }, `batch.completion_window: must not be empty (OpenAI accepts 24h)`},
		{"batch price factor", func(c *Config) { c.Batch.Enabled, c.Batch.PriceFactor = true, 0 }, `batch.price_factor: 0 is not greater than 0 and at most 1 (OpenAI bills a batch at 0.5)`},
		{"hidden states without token ids", func(c *Config) {
			c.Hidden.Enabled, c.Hidden.Dir, c.Hidden.Layers, c.Hidden.HiddenSize = true, "/hs", 4, 8
		}, `hidden_states.enabled: needs generation.return_token_ids: the states are of the ids the server gave`},
		{"hidden states without a dir", func(c *Config) {
			c.Hidden.Enabled, c.Generation.ReturnTokenIDs, c.Hidden.Layers, c.Hidden.HiddenSize = true, true, 4, 8
		}, `hidden_states.dir: must name the extraction server's shared_storage_path as this machine sees it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error\n%s\nwant\n%s", err, tt.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%T is not a *FieldError", err)
			}
			if key, _, _ := strings.Cut(tt.want, ":"); fe.Key != key {
				t.Errorf("Key = %q, want %q", fe.Key, key)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"temperature 0", func(c *Config) { c.Generation.Temperature = 0 }},
		{"temperature above 2", func(c *Config) { c.Generation.Temperature = 3 }},
		{"top_p 1", func(c *Config) { c.Generation.TopP = 1 }},
		{"token ids and 20 logprobs, required", func(c *Config) {
			c.Generation.ReturnTokenIDs, c.Generation.Logprobs, c.Generation.RequireTokenIDs = true, 20, true
		}},
		{"sync every record", func(c *Config) { c.Output.SyncInterval = 0 }},
		{"no grace", func(c *Config) { c.Shutdown.Grace = 0 }},
		{"no api key", func(c *Config) { c.Endpoint.APIKeyEnv = "" }},
		{"equal backoffs", func(c *Config) { c.Retry.InitialBackoff = c.Retry.MaxBackoff }},
		{"prompt format with field", func(c *Config) { c.Dataset.Format = "prompt"; c.Dataset.PromptField = "question" }},
		{"https metrics", func(c *Config) { c.Endpoint.MetricsURL = "https://gpu:8000/metrics" }},
		{"nil extra_body", func(c *Config) { c.Generation.ExtraBody = nil }},
		{"vendor fields in extra_body", func(c *Config) {
			c.Generation.ExtraBody = map[string]any{"top_k": 20, "min_p": 0.05, "chat_template_kwargs": map[string]any{"enable_thinking": true}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.Concurrency = 0
	c.Output.Format = "csv"
	c.Generation.TopP = 2
	err := c.Validate()
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		keys = append(keys, fe.Key)
	}
	if got := strings.Join(keys, " "); got != "generation.top_p concurrency output.format" {
		t.Errorf("keys %s", got)
	}
}

// TestBaseURLWithAQueryRefused: a base URL with a query (an API key put
// there, say) would break every request's URL; it is refused naming the
// key, and neither the query nor a password is printed.
func TestBaseURLWithAQueryRefused(t *testing.T) {
	for _, u := range []string{
		"http://gpu-01:8000/v1?api_key=sk-secret",
		"http://gpu-01:8000/v1#sk-secret",
		"ftp://user:sk-secret@gpu-01:8000/v1",
	} {
		c := Default()
		c.Endpoint.BaseURL = u
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "endpoint.base_url") {
			t.Errorf("%s: %v, want a refusal naming endpoint.base_url", u, err)
			continue
		}
		if strings.Contains(err.Error(), "sk-secret") || strings.Contains(fmt.Sprint(err), "sk-secret") {
			t.Errorf("%s: the error shows the secret: %v", u, err)
		}
	}
	c := Default()
	c.Endpoint.BaseURL = "http://gpu-01:8000/v1?x=1"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http://gpu-01:8000/v1") {
		t.Errorf("the refusal should show the base URL without its query: %v", err)
	}
}
