// Package config holds synthgen's one typed configuration: its defaults, the
// keys users and scripts depend on (docs/config.md), loading from a
// YAML/TOML/JSON file, SYNTHGEN_* environment variables and flags, and
// validation that names the bad key. Only cmd reads a Config; the other
// packages take small option structs built from it.
package config

import (
	"net/url"
	"os"
	"strings"
	"time"
)

// Config is the whole effective configuration of a run.
type Config struct {
	Endpoint    EndpointConfig   `mapstructure:"endpoint"`
	Dataset     DatasetConfig    `mapstructure:"dataset"`
	Generation  GenerationConfig `mapstructure:"generation"`
	Prompt      PromptConfig     `mapstructure:"prompt"`
	Concurrency int              `mapstructure:"concurrency"`
	Retry       RetryConfig      `mapstructure:"retry"`
	Output      OutputConfig     `mapstructure:"output"`
	Progress    ProgressConfig   `mapstructure:"progress"`
	Batch       BatchConfig      `mapstructure:"batch"`
	Hidden      HiddenConfig     `mapstructure:"hidden_states"`
	Shutdown    ShutdownConfig   `mapstructure:"shutdown"`

	// ConcurrencyAuto is set by the concurrency key's "auto" or "auto:N"
	// (not a key of its own): the server's metrics decide how many are in
	// flight, and Concurrency is the ceiling.
	ConcurrencyAuto bool `mapstructure:"-"`
}

// EndpointConfig says which OpenAI-compatible server answers and how.
type EndpointConfig struct {
	BaseURL    string        `mapstructure:"base_url"`
	Model      string        `mapstructure:"model"`
	APIKeyEnv  string        `mapstructure:"api_key_env"`
	Timeout    time.Duration `mapstructure:"timeout"`
	MetricsURL string        `mapstructure:"metrics_url"`
	// StallTimeout ends a streamed answer that sent no byte for this long
	// (retried, cause "stall"); 0 = off.
	StallTimeout time.Duration `mapstructure:"stall_timeout"`
	// CAFile is a PEM bundle of private CA certificates trusted on top of
	// the system's roots; empty: the system's roots alone.
	CAFile string `mapstructure:"ca_file"`
	// InsecureSkipVerify turns the server certificate check off.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
	// MaxRequestsPerMinute and MaxTokensPerMinute pace each replica where
	// its server states no limits (x-ratelimit-* headers); 0: none. Not in
	// the job: they do not change answers.
	MaxRequestsPerMinute int `mapstructure:"max_requests_per_minute"`
	MaxTokensPerMinute   int `mapstructure:"max_tokens_per_minute"`
	// Price is what the server bills per token (price.go), for the run's
	// cost; unset, no cost is reckoned.
	Price Price `mapstructure:"price"`
}

// DatasetConfig says where the prompts come from and how rows map to them.
type DatasetConfig struct {
	Path        string `mapstructure:"path"`
	Format      string `mapstructure:"format"`
	PromptField string `mapstructure:"prompt_field"`
	IDField     string `mapstructure:"id_field"`
	ParamsField string `mapstructure:"params_field"`
	Limit       int64  `mapstructure:"limit"`
	OnBadRow    string `mapstructure:"on_bad_row"`
	// ShardBy is how --shard i/n splits the dataset: rows (index mod n)
	// or files (whole files, each shard reading only its own).
	ShardBy string `mapstructure:"shard_by"`
}

// GenerationConfig is what is asked of the model for every prompt.
type GenerationConfig struct {
	MaxTokens   int     `mapstructure:"max_tokens"`
	Temperature float64 `mapstructure:"temperature"`
	TopP        float64 `mapstructure:"top_p"`
	N           int     `mapstructure:"n"`
	// NPerRequest asks a prompt's samples in one request carrying n (the
	// server computes the prompt once); false: one request per sample. It
	// changes no answer asked, so it is no part of the job.
	NPerRequest bool `mapstructure:"n_per_request"`
	// LongestFirst starts the rows whose own answer is longest first, a
	// bounded window at a time; it changes no answer asked, so it is no
	// part of the job.
	LongestFirst bool   `mapstructure:"longest_first"`
	SystemPrompt string `mapstructure:"system_prompt"`
	Turns        string `mapstructure:"turns"`
	OnLength     string `mapstructure:"on_length"`
	// RequireReasoning makes answers without a reasoning field fatal when
	// their content holds the model's thought in think tags (a server
	// started without a reasoning parser); else that is a warning. It
	// changes no answer, so it is no part of the job.
	RequireReasoning bool `mapstructure:"require_reasoning"`
	// ResponseFormat is the shape asked of every answer's content
	// (responseformat.go); SchemaRetries how often an answer not in it is
	// asked again. Retries change no answer that is kept, so only the
	// format is part of the job.
	ResponseFormat ResponseFormat `mapstructure:"response_format"`
	SchemaRetries  int            `mapstructure:"schema_retries"`
	// ReturnTokenIDs asks for the prompt's and the answer's token ids
	// (vLLM's return_token_ids), kept in the record.
	ReturnTokenIDs bool `mapstructure:"return_token_ids"`
	// Logprobs is how many alternatives each generated token's logprob
	// comes with (0: no logprobs; at most MaxLogprobs).
	Logprobs int `mapstructure:"logprobs"`
	// ToolChoice is sent with every row that has tools and names no
	// tool_choice of its own: auto, none or required.
	ToolChoice string `mapstructure:"tool_choice"`
	// RequireTokenIDs makes a server that sends no token ids although
	// asked fatal; else that is a warning. It changes no answer.
	RequireTokenIDs bool           `mapstructure:"require_token_ids"`
	Stream          bool           `mapstructure:"stream"`
	ExtraBody       map[string]any `mapstructure:"extra_body"`
}

// MaxLogprobs is the most alternatives generation.logprobs may ask for per
// token: OpenAI's limit, and vLLM's default --max-logprobs.
const MaxLogprobs = 20

// RetryConfig bounds the retries done inside a request's slot.
type RetryConfig struct {
	MaxAttempts    int           `mapstructure:"max_attempts"`
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	MaxBackoff     time.Duration `mapstructure:"max_backoff"`
}

// OutputConfig says where and how records are written.
type OutputConfig struct {
	Dir          string        `mapstructure:"dir"`
	Format       string        `mapstructure:"format"`
	ShardSize    int           `mapstructure:"shard_size"`
	SyncInterval time.Duration `mapstructure:"sync_interval"`
}

// ProgressConfig paces the plain progress lines printed when not on a TTY.
type ProgressConfig struct {
	Interval time.Duration `mapstructure:"interval"`
}

// HiddenConfig is the hidden-state pass (generator/hidden): after the
// generation, every record with token ids is prefilled again on a server
// run with vLLM's extract_hidden_states method and its file kept under
// DIR/hidden.
type HiddenConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Dir is the connector's shared_storage_path as this machine sees it.
	Dir string `mapstructure:"dir"`
	// BaseURL is the extraction server; empty: the first endpoint.base_url.
	BaseURL string `mapstructure:"base_url"`
	// Layers and HiddenSize are the shape past the token axis every file
	// must have: the count of eagle_aux_hidden_state_layer_ids and the
	// model's hidden size.
	Layers     int           `mapstructure:"layers"`
	HiddenSize int           `mapstructure:"hidden_size"`
	LockWait   time.Duration `mapstructure:"lock_wait"`
}

// BatchConfig is the batch-API run mode (generator/batch): the pending
// rows sent as a provider's batches instead of one request each.
type BatchConfig struct {
	Enabled          bool          `mapstructure:"enabled"`
	MaxRequests      int           `mapstructure:"max_requests"`
	MaxBytes         int64         `mapstructure:"max_bytes"`
	InFlight         int           `mapstructure:"in_flight"`
	PollInterval     time.Duration `mapstructure:"poll_interval"`
	CompletionWindow string        `mapstructure:"completion_window"`
	PriceFactor      float64       `mapstructure:"price_factor"`
}

// ShutdownConfig bounds the graceful stage of shutdown.
type ShutdownConfig struct {
	Grace time.Duration `mapstructure:"grace"`
}

// Default returns the configuration of docs/config.md. Each call returns
// its own ExtraBody map, so callers may modify the result freely.
func Default() Config {
	return Config{
		Endpoint: EndpointConfig{
			BaseURL:      "http://localhost:8000/v1",
			APIKeyEnv:    "OPENAI_API_KEY",
			Timeout:      30 * time.Minute,
			StallTimeout: 2 * time.Minute,
		},
		Dataset: DatasetConfig{
			Format:   "auto",
			OnBadRow: "skip",
			ShardBy:  "rows",
		},
		Generation: GenerationConfig{
			MaxTokens:     8192,
			Temperature:   0.6,
			TopP:          0.95,
			N:             1,
			NPerRequest:   true,
			LongestFirst:  true,
			Turns:         "first",
			OnLength:      "keep",
			ToolChoice:    "auto",
			SchemaRetries: DefaultSchemaRetries,
			Stream:        true,
			ExtraBody:     map[string]any{},
		},
		Concurrency: 200,
		Retry: RetryConfig{
			MaxAttempts:    6,
			InitialBackoff: time.Second,
			MaxBackoff:     60 * time.Second,
		},
		Output: OutputConfig{
			Dir:          "out/run",
			Format:       "parquet",
			ShardSize:    1000,
			SyncInterval: time.Second,
		},
		Progress: ProgressConfig{Interval: 10 * time.Second},
		Shutdown: ShutdownConfig{Grace: 2 * time.Minute},
		Batch:    BatchConfig{MaxRequests: 50000, MaxBytes: 200_000_000, InFlight: 2, PollInterval: 30 * time.Second, CompletionWindow: "24h", PriceFactor: 0.5},
		Hidden:   HiddenConfig{LockWait: 10 * time.Minute},
	}
}

// APIKey returns the API key from the environment variable the config names;
// the key itself never enters a Config, so it cannot leak into the manifest.
func (c Config) APIKey() string {
	if c.Endpoint.APIKeyEnv == "" {
		return ""
	}
	return os.Getenv(c.Endpoint.APIKeyEnv)
}

// Redacted returns the effective configuration as a nested map (the shape of
// the config file) for the manifest. It holds no secret: the API key is never
// in a Config (api_key_env is only the variable's name), and passwords in
// URLs are masked. Durations are strings such as "30m0s".
func (c Config) Redacted() map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		var v any
		switch p := k.field(&c).(type) {
		case *string:
			v = *p
			if k.url && *p != "" {
				v = redactURLs(*p)
			}
		case *int:
			v = *p
		case *int64:
			v = *p
		case *float64:
			v = *p
		case *bool:
			v = *p
		case *time.Duration:
			v = p.String()
		case *map[string]any:
			v = deepCopy(*p)
		case *[]PromptMessage:
			turns := make([]any, len(*p))
			for i, m := range *p {
				turns[i] = map[string]any{"role": m.Role, "content": m.Content}
			}
			v = turns
		case *concurrencyValue:
			v = p.value()
		case *ResponseFormat:
			v = p.Value
		case *Price:
			v = p.Value
		}
		setNested(out, k.name, v)
	}
	return out
}

// redactURLs masks the password of each URL of a comma-separated list.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// deepCopy copies a JSON-like tree so the manifest's copy cannot alias the
// Config's map.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = deepCopy(e)
		}
		return s
	default:
		return v
	}
}
