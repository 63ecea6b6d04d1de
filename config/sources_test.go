package config

import "testing"

// TestLoadWithSourcesSaysWhereEachValueCameFrom: each key set by the file,
// the environment or a flag is recorded with where, by the precedence Load
// takes (a flag over the environment over the file); the rest are the
// default.
func TestLoadWithSourcesSaysWhereEachValueCameFrom(t *testing.T) {
	file := writeFile(t, "job.yaml", "dataset:\n  path: a.jsonl\ngeneration:\n  temperature: 0.7\n  top_p: 0.9\nconcurrency: 8\n")
	t.Setenv("SYNTHGEN_GENERATION_TOP_P", "0.8")
	t.Setenv("SYNTHGEN_CONCURRENCY", "16")
	fs := cmdFlags(t, "--concurrency", "32")
	cfg, from, err := LoadWithSources(fs, file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency != 32 || cfg.Generation.TopP != 0.8 || cfg.Generation.Temperature != 0.7 {
		t.Fatalf("loaded concurrency %d, top_p %v, temperature %v", cfg.Concurrency, cfg.Generation.TopP, cfg.Generation.Temperature)
	}
	for key, want := range map[string]string{
		"dataset.path":           file + ":2",
		"generation.temperature": file + ":4",
		"generation.top_p":       "env SYNTHGEN_GENERATION_TOP_P",
		"concurrency":            "flag --concurrency",
		"generation.max_tokens":  "the default",
	} {
		if got := from.Of(key); got != want {
			t.Errorf("%s came from %q, want %q", key, got, want)
		}
	}
}
