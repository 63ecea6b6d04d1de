package generator

import (
	"testing"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/job"
)

// The config summary of report.json is the job as run (model resolved)
// and the setup, with any password in the URL masked.
func TestReportConfig(t *testing.T) {
	j := job.Job{
		Selection: dataset.Selection{Path: "prompts.jsonl", Format: "messages", Limit: 1000, Shard: dataset.Shard{Index: 1, Count: 4}},
		Sampling:  job.Sampling{Model: "resolved-model", MaxTokens: 2048, Samples: 2},
	}
	setup := Setup{BaseURL: "http://user:hunter2@gpu-07:8000/v1", Concurrency: 64, Stream: false, Format: "jsonl"}
	got := newReportConfig(j, setup)
	want := runfiles.ReportConfig{BaseURL: "http://user:xxxxx@gpu-07:8000/v1", Model: "resolved-model", Dataset: "prompts.jsonl",
		Format: "messages", Limit: 1000, Shard: "1/4", Concurrency: 64, Samples: 2, MaxTokens: 2048,
		Stream: false, OutputFormat: "jsonl"}
	if got != want {
		t.Errorf("report config =\n%+v\nwant\n%+v", got, want)
	}
	if got := newReportConfig(job.Job{}, Setup{}); got.Shard != "" {
		t.Errorf("no shard: %q, want it left out", got.Shard)
	}
}
