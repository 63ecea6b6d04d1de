package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// designDefaults is DESIGN.md's table written out by hand, so a change to
// Default() that the page does not make fails here.
func designDefaults() Config {
	var c Config
	c.Endpoint = EndpointConfig{BaseURL: "http://localhost:8000/v1", APIKeyEnv: "OPENAI_API_KEY", Timeout: 30 * time.Minute}
	c.Dataset = DatasetConfig{Path: "examples/data/sample.jsonl", Format: "auto", OnBadRow: "skip"}
	c.Generation = GenerationConfig{MaxTokens: 8192, Temperature: 0.6, TopP: 0.95, N: 1, Stream: true, ExtraBody: map[string]any{}}
	c.Concurrency = 200
	c.Retry = RetryConfig{MaxAttempts: 6, InitialBackoff: time.Second, MaxBackoff: time.Minute}
	c.Output = OutputConfig{Dir: "out/run", Format: "parquet", ShardSize: 1000, SyncInterval: time.Second}
	c.Progress.Interval = 10 * time.Second
	c.Shutdown.Grace = 2 * time.Minute
	return c
}

func TestDefaultMatchesDesign(t *testing.T) {
	t.Run("table", func(t *testing.T) {
		if got, want := Default(), designDefaults(); !reflect.DeepEqual(got, want) {
			t.Errorf("Default() =\n%+v\nwant DESIGN.md's\n%+v", got, want)
		}
	})
	t.Run("design yaml loads to the defaults", func(t *testing.T) {
		// testdata/design.yaml is DESIGN.md's config block verbatim: it
		// names every key, so it also proves the page's file has no key
		// the loader calls unknown.
		got, err := Load(nil, filepath.Join("testdata", "design.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := designDefaults(); !reflect.DeepEqual(got, want) {
			t.Errorf("loaded design.yaml =\n%+v\nwant\n%+v", got, want)
		}
	})
	t.Run("design yaml is DESIGN.md's block", func(t *testing.T) {
		// shared/ sits beside the repository on developer machines and in CI.
		page, err := os.ReadFile(filepath.Join("..", "..", "shared", "DESIGN.md"))
		if err != nil {
			t.Skipf("DESIGN.md not beside the repository: %v", err)
		}
		block := designConfigBlock(t, string(page))
		ours, err := os.ReadFile(filepath.Join("testdata", "design.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if block != string(ours) {
			t.Errorf("testdata/design.yaml differs from DESIGN.md's config block; copy it again:\n%s", block)
		}
	})
	t.Run("default validates", func(t *testing.T) {
		if err := Default().Validate(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("each call has its own extra_body", func(t *testing.T) {
		a := Default()
		a.Generation.ExtraBody["top_k"] = 20
		if b := Default(); len(b.Generation.ExtraBody) != 0 {
			t.Fatalf("Default() shares its map: %v", b.Generation.ExtraBody)
		}
	})
}

func designConfigBlock(t *testing.T, page string) string {
	t.Helper()
	_, after, ok := strings.Cut(page, "## The config (interface")
	if !ok {
		t.Fatal(`DESIGN.md has no "## The config (interface" section`)
	}
	_, after, ok = strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("DESIGN.md's config section has no yaml block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("DESIGN.md's yaml block is not closed")
	}
	return block
}

// TestEveryFieldHasAKey walks Config's fields by their mapstructure names, so
// a field added without a key (no flag, no env, no file) fails here.
func TestEveryFieldHasAKey(t *testing.T) {
	var fields []string
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for f := range rt.Fields() {
			name := joinKey(prefix, f.Tag.Get("mapstructure"))
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				walk(f.Type, name)
				continue
			}
			fields = append(fields, name)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	if got := Keys(); !slices.Equal(fields, got) {
		t.Errorf("Config fields %v\nkeys %v", fields, got)
	}
}

func TestAnswerKeys(t *testing.T) {
	base := Default().AnswerKeys()
	for _, k := range []string{"endpoint.model", "generation.max_tokens", "generation.temperature", "generation.top_p",
		"generation.n", "generation.system_prompt", "generation.extra_body", "dataset.path", "dataset.format",
		"dataset.prompt_field", "dataset.id_field"} {
		if _, ok := base[k]; !ok {
			t.Errorf("AnswerKeys lacks %s", k)
		}
	}
	tests := []struct {
		name    string
		mutate  func(c *Config)
		changed string // "" = the map must not change
	}{
		{"model", func(c *Config) { c.Endpoint.Model = "qwen3" }, "endpoint.model"},
		{"temperature to 0", func(c *Config) { c.Generation.Temperature = 0 }, "generation.temperature"},
		{"top_p", func(c *Config) { c.Generation.TopP = 1 }, "generation.top_p"},
		{"max_tokens", func(c *Config) { c.Generation.MaxTokens = 100 }, "generation.max_tokens"},
		{"n", func(c *Config) { c.Generation.N = 4 }, "generation.n"},
		{"system prompt", func(c *Config) { c.Generation.SystemPrompt = "be brief" }, "generation.system_prompt"},
		{"extra_body", func(c *Config) { c.Generation.ExtraBody = map[string]any{"top_k": 20} }, "generation.extra_body"},
		{"dataset path", func(c *Config) { c.Dataset.Path = "other.jsonl" }, "dataset.path"},
		{"dataset format", func(c *Config) { c.Dataset.Format = "sharegpt" }, "dataset.format"},
		{"prompt field", func(c *Config) { c.Dataset.PromptField = "q" }, "dataset.prompt_field"},
		{"id field", func(c *Config) { c.Dataset.IDField = "uuid" }, "dataset.id_field"},
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
			got := c.AnswerKeys()
			var diff []string
			for k, v := range got {
				if base[k] != v {
					diff = append(diff, k)
				}
			}
			var want []string
			if tt.changed != "" {
				want = []string{tt.changed}
			}
			if !slices.Equal(diff, want) {
				t.Errorf("changed keys %v, want %v", diff, want)
			}
		})
	}
	t.Run("temperature 0 is not the empty string", func(t *testing.T) {
		c := Default()
		c.Generation.Temperature = 0
		if got := c.AnswerKeys()["generation.temperature"]; got != "0" {
			t.Errorf("temperature 0 -> %q", got)
		}
	})
}

func TestRedacted(t *testing.T) {
	t.Setenv("MY_KEY", "sk-very-secret")
	c := Default()
	c.Endpoint.APIKeyEnv = "MY_KEY"
	c.Endpoint.BaseURL = "https://user:hunter2@gpu.example:8000/v1"
	c.Generation.ExtraBody = map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}

	if got := c.APIKey(); got != "sk-very-secret" {
		t.Fatalf("APIKey() = %q", got)
	}
	r := c.Redacted()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("manifest copy does not encode: %v", err)
	}
	s := string(b)
	for _, secret := range []string{"sk-very-secret", "hunter2"} {
		if strings.Contains(s, secret) {
			t.Errorf("redacted config holds %q: %s", secret, s)
		}
	}
	for _, want := range []string{`"api_key_env":"MY_KEY"`, `"timeout":"30m0s"`, `"concurrency":200`,
		`"temperature":0.6`, `"enable_thinking":false`, `"base_url":"https://user:xxxxx@gpu.example:8000/v1"`} {
		if !strings.Contains(s, want) {
			t.Errorf("redacted config lacks %s: %s", want, s)
		}
	}
	// The manifest's copy must not alias the Config's map.
	r["generation"].(map[string]any)["extra_body"].(map[string]any)["chat_template_kwargs"].(map[string]any)["x"] = 1
	if _, ok := c.Generation.ExtraBody["chat_template_kwargs"].(map[string]any)["x"]; ok {
		t.Error("Redacted shares extra_body with the Config")
	}
	// Every key appears once, at its dotted place.
	for _, k := range Keys() {
		var cur any = r
		for _, p := range strings.Split(k, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%s: not nested in %v", k, r)
			}
			cur, ok = m[p]
			if !ok {
				t.Fatalf("%s missing from Redacted", k)
			}
		}
	}
}

func TestAPIKeyEmptyName(t *testing.T) {
	c := Default()
	c.Endpoint.APIKeyEnv = ""
	if got := c.APIKey(); got != "" {
		t.Errorf("APIKey() with no variable name = %q", got)
	}
}
