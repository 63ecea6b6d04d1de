package main

// The job's response format, compiled before anything starts (the job
// itself is config.Config.Job).

import (
	"fmt"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/job"
)

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
