package main

// The job a configuration asks: config keys become the typed job.Job the
// manifest stores and every resume compares, and its response format is
// compiled before anything starts.

import (
	"fmt"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
)

// jobOf is the job a configuration asks: the one place config keys become
// the typed job that the manifest stores and resumes compare.
func jobOf(cfg config.Config, shard dataset.Shard) job.Job {
	var by dataset.ShardBy // rows: the empty value, which keeps older jobs' hashes
	if cfg.Dataset.ShardBy == string(dataset.ShardFiles) {
		by = dataset.ShardFiles
	}
	return job.Job{
		Selection: dataset.Selection{
			Path:        cfg.Dataset.Path,
			Format:      cfg.Dataset.Format,
			PromptField: cfg.Dataset.PromptField,
			IDField:     cfg.Dataset.IDField,
			ParamsField: cfg.Dataset.ParamsField,
			Limit:       cfg.Dataset.Limit,
			ShardBy:     by,
			Shard:       shard,
		},
		Prompt: job.Prompting{SystemPrompt: cfg.Generation.SystemPrompt, Turns: job.Turns(cfg.Generation.Turns), Template: templateOf(cfg)},
		Sampling: job.Sampling{
			Model:       cfg.Endpoint.Model,
			MaxTokens:   cfg.Generation.MaxTokens,
			Temperature: cfg.Generation.Temperature,
			TopP:        cfg.Generation.TopP,
			Extra:       cfg.Generation.ExtraBody,
			Samples:     cfg.Generation.N,
			OnLength:    job.OnLength(cfg.Generation.OnLength),
			// The schema's content, not the file it was read from.
			ResponseFormat: job.ResponseFormat{
				Type:   cfg.Generation.ResponseFormat.Type,
				Name:   cfg.Generation.ResponseFormat.Name,
				Schema: cfg.Generation.ResponseFormat.Schema,
				Strict: cfg.Generation.ResponseFormat.Strict,
			},
			ReturnTokenIDs: cfg.Generation.ReturnTokenIDs,
			Logprobs:       cfg.Generation.Logprobs,
			ToolChoice:     jobToolChoice(cfg.Generation.ToolChoice),
		},
	}
}

// jobToolChoice is generation.tool_choice as the job holds it: auto, the
// default, is "" (jobs made before the key keep their hash; the wire sends
// auto for it).
func jobToolChoice(c string) string {
	if c == wire.ToolChoiceAuto {
		return ""
	}
	return c
}

// checkResponseFormat compiles the job's response format before anything
// starts: a schema that is no valid JSON Schema is a config error naming
// the key, where it was set and the schema's file.
func checkResponseFormat(cfg config.Config, from config.Sources, j job.Job) (*shape.Validator, error) {
	const key = "generation.response_format"
	v, err := shape.Compile(j.Sampling.ResponseFormat)
	if err != nil {
		where := key
		if file := cfg.Generation.ResponseFormat.File; file != "" {
			where += " (schema file " + file + ")"
		}
		if src := from[key]; src != "" {
			where = src + ": " + where
		}
		return nil, usageError(fmt.Errorf("%s: %w", where, err),
			"fix the schema (a JSON Schema, draft 2020-12 unless its $schema says another), or set generation.response_format: json_object for any one JSON object")
	}
	return v, nil
}

// templateOf is prompt.messages as the job holds it (nil: none).
func templateOf(cfg config.Config) []chat.Message {
	if len(cfg.Prompt.Messages) == 0 {
		return nil
	}
	out := make([]chat.Message, len(cfg.Prompt.Messages))
	for i, m := range cfg.Prompt.Messages {
		out[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	return out
}
