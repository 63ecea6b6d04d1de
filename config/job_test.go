package config

import (
	"slices"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
)

// TestJobIdentity: which settings change the job's identity. Config.Job is
// the one place configuration becomes a job, so this table is where a new
// setting says whether it changes the answers.
func TestJobIdentity(t *testing.T) {
	base := Default().Job(dataset.Shard{})
	tests := []struct {
		name    string
		mutate  func(c *Config)
		changed string // the key Diff names; "" = the same job
	}{
		{"model", func(c *Config) { c.Endpoint.Model = "qwen3" }, "endpoint.model"},
		{"temperature to 0", func(c *Config) { c.Generation.Temperature = 0 }, "generation.temperature"},
		{"top_p", func(c *Config) { c.Generation.TopP = 1 }, "generation.top_p"},
		{"max_tokens", func(c *Config) { c.Generation.MaxTokens = 100 }, "generation.max_tokens"},
		{"n", func(c *Config) { c.Generation.N = 4 }, "generation.n"},
		{"system prompt", func(c *Config) { c.Generation.SystemPrompt = "be brief" }, "generation.system_prompt"},
		{"whole conversations", func(c *Config) { c.Generation.Turns = "all" }, "generation.turns"},
		{"cut answers retried", func(c *Config) { c.Generation.OnLength = "retry" }, "generation.on_length"},
		{"extra_body", func(c *Config) { c.Generation.ExtraBody = map[string]any{"top_k": 20} }, "generation.extra_body"},
		{"token ids", func(c *Config) { c.Generation.ReturnTokenIDs = true }, "generation.return_token_ids"},
		{"logprobs", func(c *Config) { c.Generation.Logprobs = 5 }, "generation.logprobs"}, // Job takes it as it is: Validate wants ids too
		{"dataset format", func(c *Config) { c.Dataset.Format = "sharegpt" }, "dataset.format"},
		{"prompt field", func(c *Config) { c.Dataset.PromptField = "q" }, "dataset.prompt_field"},
		{"id field", func(c *Config) { c.Dataset.IDField = "uuid" }, "dataset.id_field"},
		{"params field", func(c *Config) { c.Dataset.ParamsField = "sampling" }, "dataset.params_field"},
		// The path names the files; their content (stamped by the runner)
		// is the dataset's identity.
		{"dataset path", func(c *Config) { c.Dataset.Path = "other.jsonl" }, ""},
		{"limit grows", func(c *Config) { c.Dataset.Limit = 5000 }, ""},
		{"stream off", func(c *Config) { c.Generation.Stream = false }, ""},
		{"concurrency", func(c *Config) { c.Concurrency = 8 }, ""},
		{"output", func(c *Config) { c.Output.Dir = "/x"; c.Output.Format = "jsonl"; c.Output.ShardSize = 1 }, ""},
		{"retry", func(c *Config) { c.Retry.MaxAttempts = 1 }, ""},
		{"transport", func(c *Config) { c.Endpoint.BaseURL = "http://gpu:9000/v1"; c.Endpoint.Timeout = time.Hour }, ""},
		{"nil extra_body is {}", func(c *Config) { c.Generation.ExtraBody = nil }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			job := c.Job(dataset.Shard{})
			var keys []string
			for _, ch := range job.Diff(base) {
				keys = append(keys, ch.Key)
			}
			if want := tt.changed; (want == "" && len(keys) != 0) || (want != "" && !slices.Equal(keys, []string{want})) {
				t.Errorf("changed settings %v, want %q", keys, want)
			}
			if same := job.Hash() == base.Hash(); same != (tt.changed == "") {
				t.Errorf("hash unchanged = %v, want %v", same, tt.changed == "")
			}
		})
	}
	t.Run("the shard is compared, not hashed", func(t *testing.T) {
		job := Default().Job(dataset.Shard{Index: 1, Count: 4})
		if job.Hash() != base.Hash() {
			t.Error("the shards of one job have different hashes: inspect could not combine them")
		}
		if d := job.Diff(base); len(d) != 1 || d[0].Key != "shard" || d[0].Old != "all" || d[0].New != "1/4" {
			t.Errorf("Diff = %+v, want shard all -> 1/4", d)
		}
	})
}

// TestBatchModeFigures: off, the batch keys change nothing a run is given;
// on, they size the pool (in_flight full batches) and bill at price_factor.
func TestBatchModeFigures(t *testing.T) {
	c := Default()
	c.Concurrency = 7
	if c.BatchOptions() != nil || c.PoolSize() != 7 || c.PriceFactor() != 1 {
		t.Errorf("batch off: options %v, pool %d, price factor %v; want nil, 7, 1", c.BatchOptions(), c.PoolSize(), c.PriceFactor())
	}
	c.Batch.Enabled, c.Batch.MaxRequests, c.Batch.InFlight, c.Batch.PriceFactor = true, 100, 3, 0.5
	c.Batch.MaxBytes, c.Batch.PollInterval, c.Batch.CompletionWindow = 4096, time.Minute, "24h"
	o := c.BatchOptions()
	if o == nil || o.MaxRequests != 100 || o.MaxBytes != 4096 || o.PollInterval != time.Minute || o.Window != "24h" {
		t.Errorf("batch on: options %+v", o)
	}
	if c.PoolSize() != 300 || c.PriceFactor() != 0.5 {
		t.Errorf("batch on: pool %d, price factor %v; want 300, 0.5", c.PoolSize(), c.PriceFactor())
	}
}
