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

	yaml "go.yaml.in/yaml/v3"
)

// documentedDefaults is the defaults written out by hand, so a change to
// Default() is a change made twice, on purpose; docs/config.md's config
// block (generated from the key table) must load to them.
func documentedDefaults() Config {
	var c Config
	c.Endpoint = EndpointConfig{BaseURL: "http://localhost:8000/v1", APIKeyEnv: "OPENAI_API_KEY", Timeout: 30 * time.Minute, StallTimeout: 2 * time.Minute}
	c.Dataset = DatasetConfig{Format: "auto", OnBadRow: "skip", ShardBy: "rows"}
	c.Generation = GenerationConfig{MaxTokens: 8192, Temperature: 0.6, TopP: 0.95, N: 1, NPerRequest: true, LongestFirst: true, Turns: "first", OnLength: "keep", ToolChoice: "auto", SchemaRetries: 2, Stream: true, ExtraBody: map[string]any{}}
	c.Concurrency = 200
	c.Retry = RetryConfig{MaxAttempts: 6, InitialBackoff: time.Second, MaxBackoff: time.Minute}
	c.Output = OutputConfig{Dir: "out/run", Format: "parquet", ShardSize: 1000, SyncInterval: time.Second}
	c.Progress.Interval = 10 * time.Second
	c.Batch = BatchConfig{MaxRequests: 50000, MaxBytes: 200_000_000, InFlight: 2, PollInterval: 30 * time.Second, CompletionWindow: "24h", PriceFactor: 0.5}
	c.Hidden = HiddenConfig{LockWait: 10 * time.Minute}
	c.Shutdown.Grace = 2 * time.Minute
	return c
}

// TestDefaultMatchesTheReference checks the project's own document: the
// config block of docs/config.md names every key, no other, with the
// defaults the code has.
func TestDefaultMatchesTheReference(t *testing.T) {
	t.Run("table", func(t *testing.T) {
		if got, want := Default(), documentedDefaults(); !reflect.DeepEqual(got, want) {
			t.Errorf("Default() =\n%+v\nwant the documented\n%+v", got, want)
		}
	})
	page, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	block := documentedConfigBlock(t, string(page))
	t.Run("the block loads to the defaults", func(t *testing.T) {
		// Load refuses a key it does not know, with the file and line.
		path := filepath.Join(t.TempDir(), "documented.yaml")
		if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(nil, path)
		if err != nil {
			t.Fatal(err)
		}
		if want := documentedDefaults(); !reflect.DeepEqual(got, want) {
			t.Errorf("loaded docs/config.md's block =\n%+v\nwant\n%+v", got, want)
		}
	})
	t.Run("the block names every key", func(t *testing.T) {
		var tree map[string]any
		if err := yaml.Unmarshal([]byte(block), &tree); err != nil {
			t.Fatal(err)
		}
		for _, k := range Keys() {
			var v any = tree
			for _, part := range strings.Split(k, ".") {
				m, _ := v.(map[string]any)
				v = m[part]
				if m == nil || !hasKey(m, part) {
					t.Errorf("docs/config.md's config block lacks %s", k)
					break
				}
			}
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

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func documentedConfigBlock(t *testing.T, page string) string {
	t.Helper()
	_, after, ok := strings.Cut(page, "## All the defaults as one file")
	if !ok {
		t.Fatal(`docs/config.md has no "## All the defaults as one file" section`)
	}
	_, after, ok = strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("docs/config.md's defaults section has no yaml block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("docs/config.md's yaml block is not closed")
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
			if f.Tag.Get("mapstructure") == "-" {
				continue // set by another key (ConcurrencyAuto, by concurrency)
			}
			name := joinKey(prefix, f.Tag.Get("mapstructure"))
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() && f.Type != reflect.TypeFor[ResponseFormat]() && f.Type != reflect.TypeFor[Price]() {
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
