package config

// The job a configuration asks, and the run-mode figures derived from it
// (the batch mode's sizing, the price factor): config keys become the typed
// job.Job the manifest stores and every resume compares here, beside the
// keys, so the command and the benchmarks build a job the same way.

import (
	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
)

// Job is the job c asks of shard: the one place config keys become the
// typed job that the manifest stores and resumes compare.
func (c Config) Job(shard dataset.Shard) job.Job {
	var by dataset.ShardBy // rows: the empty value, which keeps older jobs' hashes
	if c.Dataset.ShardBy == string(dataset.ShardFiles) {
		by = dataset.ShardFiles
	}
	g := c.Generation
	return job.Job{
		Selection: dataset.Selection{
			Path:        c.Dataset.Path,
			Format:      c.Dataset.Format,
			PromptField: c.Dataset.PromptField,
			IDField:     c.Dataset.IDField,
			ParamsField: c.Dataset.ParamsField,
			Limit:       c.Dataset.Limit,
			ShardBy:     by,
			Shard:       shard,
		},
		Prompt: job.Prompting{SystemPrompt: g.SystemPrompt, Turns: job.Turns(g.Turns), Template: c.Template()},
		Sampling: job.Sampling{
			Model:       c.Endpoint.Model,
			MaxTokens:   g.MaxTokens,
			Temperature: g.Temperature,
			TopP:        g.TopP,
			Extra:       g.ExtraBody,
			Samples:     g.N,
			OnLength:    job.OnLength(g.OnLength),
			// The schema's content, not the file it was read from.
			ResponseFormat: job.ResponseFormat{
				Type:   g.ResponseFormat.Type,
				Name:   g.ResponseFormat.Name,
				Schema: g.ResponseFormat.Schema,
				Strict: g.ResponseFormat.Strict,
			},
			ReturnTokenIDs: g.ReturnTokenIDs,
			Logprobs:       g.Logprobs,
			ToolChoice:     jobToolChoice(g.ToolChoice),
		},
	}
}

// jobToolChoice is generation.tool_choice as the job holds it: auto, the
// default, is "" (jobs made before the key keep their hash; the wire sends
// auto for it).
func jobToolChoice(choice string) string {
	if choice == wire.ToolChoiceAuto {
		return ""
	}
	return choice
}

// Template is prompt.messages as the job holds it (nil: none).
func (c Config) Template() []chat.Message {
	if len(c.Prompt.Messages) == 0 {
		return nil
	}
	out := make([]chat.Message, len(c.Prompt.Messages))
	for i, m := range c.Prompt.Messages {
		out[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// BatchOptions is batch.*'s run mode; nil when batch.enabled is false.
func (c Config) BatchOptions() *batch.Options {
	b := c.Batch
	if !b.Enabled {
		return nil
	}
	return &batch.Options{MaxRequests: b.MaxRequests, MaxBytes: b.MaxBytes, PollInterval: b.PollInterval, Window: b.CompletionWindow}
}

// PriceFactor is the share of endpoint.price the run's tokens are billed:
// batch.price_factor in the batch mode, else all of it.
func (c Config) PriceFactor() float64 {
	if c.Batch.Enabled {
		return c.Batch.PriceFactor
	}
	return 1
}

// PoolSize is the number of requests the pool holds: concurrency, or in
// the batch mode the rows of batch.in_flight full batches.
func (c Config) PoolSize() int {
	if b := c.Batch; b.Enabled {
		return b.MaxRequests * b.InFlight
	}
	return c.Concurrency
}
