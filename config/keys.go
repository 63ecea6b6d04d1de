package config

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synthgen/synthgen/sink/layout"
)

// key is one config key: its dotted name (also its flag name), a one-line
// usage for --help, and the Config field it fills. The table below is the
// single list that flags, environment variables, the unknown-key check, the
// manifest and the tests all walk, so a key cannot exist in one and not the
// others.
type key struct {
	name  string
	usage string
	// field returns a pointer to the key's field in c: *string, *int, *int64,
	// *float64, *bool, *time.Duration, *map[string]any or *[]PromptMessage.
	field func(c *Config) any
	// url marks strings that are URLs, whose passwords Redacted masks.
	url bool
	// list marks strings that may hold several values: a YAML/TOML/JSON
	// list in a file, comma-separated in a flag or the environment. The
	// field holds them comma-separated (config.List splits them).
	list bool
}

var keys = []key{
	{name: "endpoint.base_url", url: true, list: true, usage: "root URL of the OpenAI-compatible API the requests go to; several replicas: a list in the file, comma-separated here (each request goes to the healthy one with the fewest in flight)", field: func(c *Config) any { return &c.Endpoint.BaseURL }},
	{name: "endpoint.model", usage: "model to ask for, checked against /v1/models before anything is sent; empty: the first model listed there", field: func(c *Config) any { return &c.Endpoint.Model }},
	{name: "endpoint.api_key_env", usage: "name of the environment variable holding the API key (the key itself is never stored)", field: func(c *Config) any { return &c.Endpoint.APIKeyEnv }},
	{name: "endpoint.timeout", usage: "time limit for one whole request, a streamed answer included", field: func(c *Config) any { return &c.Endpoint.Timeout }},
	{name: "endpoint.metrics_url", url: true, list: true, usage: "the server's Prometheus /metrics URL; empty: derived from base_url (from each, with several); with several base_urls, one per base_url in the same order", field: func(c *Config) any { return &c.Endpoint.MetricsURL }},
	{name: "endpoint.stall_timeout", usage: "a streamed answer that sends no byte (keep-alive comments count) for this long after its headers is cut and retried (cause stall); 0: off. A plain answer (generation.stream false) sends nothing until it is whole, so only endpoint.timeout bounds it", field: func(c *Config) any { return &c.Endpoint.StallTimeout }},
	{name: "endpoint.ca_file", usage: "PEM bundle of private CA certificates to trust for an https base_url (and metrics_url), on top of the system's roots", field: func(c *Config) any { return &c.Endpoint.CAFile }},
	{name: "endpoint.insecure_skip_verify", usage: "do not check the server's TLS certificate at all (testing only: anyone on the path can read the prompts and the API key); warned about at start", field: func(c *Config) any { return &c.Endpoint.InsecureSkipVerify }},
	{name: "endpoint.max_requests_per_minute", usage: "requests per minute each replica is sent at most, where its server states no limit of its own (a hosted one's x-ratelimit-* headers, which are followed when it does); 0: none", field: func(c *Config) any { return &c.Endpoint.MaxRequestsPerMinute }},
	{name: "endpoint.max_tokens_per_minute", usage: "tokens per minute each replica is sent at most, a request counted as its prompt's estimate plus max_tokens, as providers count at admission, where its server states no limit of its own; 0: none", field: func(c *Config) any { return &c.Endpoint.MaxTokensPerMinute }},
	{name: "endpoint.price", usage: `what the server bills, USD per million tokens, for the run's cost (progress line, ` + layout.StatusName + ", " + layout.ReportName + `, inspect, the view, each record's cost): {input: 2.5, output: 10, cached_input: 1.25} for any model, or one such mapping per model ({gpt-4o: {...}}); here a JSON object, e.g. '{"input":2.5,"output":10}'. cached_input (unset: input) prices usage.prompt_tokens_details.cached_tokens; empty: no cost`, field: func(c *Config) any { return &c.Endpoint.Price }},

	{name: "dataset.path", usage: "dataset file or glob (.jsonl, .json, .parquet; gzip and zstd read transparently), a Hugging Face dataset hf://owner/name[@revision][/glob], or the output.dir of a run that ended (its records are the rows: a second pass); required, no default", field: func(c *Config) any { return &c.Dataset.Path }},
	{name: "dataset.format", usage: "row shape: auto, sharegpt, messages, prompt, alpaca, openai-batch, or rows (any columns: prompt.messages makes the prompt; auto means rows when it is set)", field: func(c *Config) any { return &c.Dataset.Format }},
	{name: "dataset.prompt_field", usage: "column holding the prompt text (required with dataset.format prompt)", field: func(c *Config) any { return &c.Dataset.PromptField }},
	{name: "dataset.id_field", usage: "column holding each row's id; empty: the 0-based row index", field: func(c *Config) any { return &c.Dataset.IDField }},
	{name: "dataset.params_field", usage: "column holding an object of each row's own request fields (temperature, max_tokens, seed, ...), which replace the config's for that row; empty: none (an openai-batch row's body always does)", field: func(c *Config) any { return &c.Dataset.ParamsField }},
	{name: "dataset.limit", usage: "use only the first N rows; 0: all rows", field: func(c *Config) any { return &c.Dataset.Limit }},
	{name: "dataset.on_bad_row", usage: "what a malformed row does: skip (reported with file:line and counted) or fail", field: func(c *Config) any { return &c.Dataset.OnBadRow }},
	{name: "dataset.shard_by", usage: "how --shard i/n splits the dataset: rows (the rows whose index mod n is i; every shard reads every file) or files (the files whose place in sorted path order mod n is i, whole: each shard stamps, downloads and reads only its files; ids become FILE:ROW and dataset.limit is each file's)", field: func(c *Config) any { return &c.Dataset.ShardBy }},

	{name: "generation.max_tokens", usage: "most tokens one answer may have", field: func(c *Config) any { return &c.Generation.MaxTokens }},
	{name: "generation.temperature", usage: "sampling temperature (0 is sent to the server as 0)", field: func(c *Config) any { return &c.Generation.Temperature }},
	{name: "generation.top_p", usage: "nucleus sampling probability mass, greater than 0 and at most 1", field: func(c *Config) any { return &c.Generation.TopP }},
	{name: "generation.n", usage: "samples (answers) per prompt", field: func(c *Config) any { return &c.Generation.N }},
	{name: "generation.n_per_request", usage: "ask a prompt's samples (generation.n > 1) still to do in one request carrying n, which the server answers as n choices computing the prompt once; a server found to ignore n (one choice back) is said once and asked one request per sample from then on; false: always one request per sample", field: func(c *Config) any { return &c.Generation.NPerRequest }},
	{name: "generation.longest_first", usage: "start the rows whose own assistant answer (the one regenerated) is longest first, so that a long answer does not start late and hold the job's last minutes with the servers less than full: rows are held in a window of 16 x concurrency, longest first; rows without an answer go in dataset order; false: dataset order", field: func(c *Config) any { return &c.Generation.LongestFirst }},
	{name: "generation.system_prompt", usage: "system turn to set or replace in every prompt; empty: keep the dataset's", field: func(c *Config) any { return &c.Generation.SystemPrompt }},
	{name: "generation.turns", usage: "first: answer the conversation up to its first assistant turn; all: regenerate every assistant turn in sequence, each asked with the model's own earlier answers (a whole conversation is one key, done when all its turns are)", field: func(c *Config) any { return &c.Generation.Turns }},
	{name: "generation.on_length", usage: "what an answer cut at max_tokens (finish_reason length) does: keep it, or retry it with twice the room, up to 4x max_tokens, so that long reasoning is not silently dropped from the data", field: func(c *Config) any { return &c.Generation.OnLength }},
	{name: "generation.require_reasoning", usage: "stop the run (exit 1) when the first answers carry no reasoning field but <think> tags in their content, as from a vLLM started without --reasoning-parser; false: only warn", field: func(c *Config) any { return &c.Generation.RequireReasoning }},
	{name: "generation.response_format", usage: "the shape every answer's content must have, sent as OpenAI's response_format: json_object (one JSON object), a JSON Schema (a mapping in the file, '{...}' here) or @FILE holding one (or either as OpenAI's own response_format object); an answer whose content is not valid for it is asked again (generation.schema_retries), then recorded in errors/ (cause schema); empty: none", field: func(c *Config) any { return &c.Generation.ResponseFormat }},
	{name: "generation.schema_retries", usage: "how many times an answer whose content is not valid for generation.response_format is asked again before it is recorded in errors/ (cause schema); 0: never", field: func(c *Config) any { return &c.Generation.SchemaRetries }},
	{name: "generation.return_token_ids", usage: "ask the server for the token ids of every prompt and answer (vLLM >= 0.10.2's return_token_ids) and keep them in the record as prompt_token_ids and token_ids (per turn too), the exact tokens a drafter trains on", field: func(c *Config) any { return &c.Generation.ReturnTokenIDs }},
	{name: "generation.logprobs", usage: "keep each generated token's logprob and its top N alternatives (ids and logprobs, in the record's logprobs), N at most 20; 0: none. Needs generation.return_token_ids", field: func(c *Config) any { return &c.Generation.Logprobs }},
	{name: "generation.tool_choice", usage: "the tool_choice sent with a row that has tools and names none of its own: auto (the model decides), none or required", field: func(c *Config) any { return &c.Generation.ToolChoice }},
	{name: "generation.require_token_ids", usage: "stop the run (exit 1) when the first answers carry no token ids although generation.return_token_ids asks for them (a server that ignores it: vLLM before 0.10.2, most others); false: only warn", field: func(c *Config) any { return &c.Generation.RequireTokenIDs }},
	{name: "generation.stream", usage: "stream answers (tokens counted as they arrive, time to first token measured)", field: func(c *Config) any { return &c.Generation.Stream }},
	{name: "generation.extra_body", usage: `JSON object merged into every request body, e.g. '{"top_k":20}'`, field: func(c *Config) any { return &c.Generation.ExtraBody }},

	{name: "prompt.messages", usage: `the turns sent for each row, made of its own fields: a list of {role, content}, each content a Go text/template ({{.question}}, {{.meta.lang}}, {{json .messages}}, {{.context | truncate 2000}}, {{.lang | default "en"}}, trim, join); a row lacking a field a turn reads is a bad row. Here a JSON list, e.g. '[{"role":"user","content":"{{.question}}"}]'; empty: the row's own prompt (dataset.format)`, field: func(c *Config) any { return &c.Prompt.Messages }},

	{name: "concurrency", usage: "requests kept in flight at once: a number, or auto to grow and shrink it from the server's vLLM metrics (queue, throughput, preemptions, KV cache) up to 512, or auto:N up to N", field: func(c *Config) any { return &concurrencyValue{n: &c.Concurrency, auto: &c.ConcurrencyAuto} }},

	{name: "retry.max_attempts", usage: "tries per request, the first one included", field: func(c *Config) any { return &c.Retry.MaxAttempts }},
	{name: "retry.initial_backoff", usage: "upper bound of the (randomly jittered) wait before the first retry; it doubles on each further retry", field: func(c *Config) any { return &c.Retry.InitialBackoff }},
	{name: "retry.max_backoff", usage: "cap of the retry wait's upper bound as it doubles; a server's longer Retry-After still wins", field: func(c *Config) any { return &c.Retry.MaxBackoff }},

	{name: "output.dir", usage: "output directory (manifest, data shards, errors); running again resumes it", field: func(c *Config) any { return &c.Output.Dir }},
	{name: "output.format", usage: "shard format: jsonl or parquet", field: func(c *Config) any { return &c.Output.Format }},
	{name: "output.shard_size", usage: "records per shard file", field: func(c *Config) any { return &c.Output.ShardSize }},
	{name: "output.sync_interval", usage: "longest time a finished record waits for fsync; 0: fsync every record", field: func(c *Config) any { return &c.Output.SyncInterval }},

	{name: "progress.interval", usage: "time between progress lines when output is not a terminal (and between --log-format json objects, " + layout.StatusName + " rewrites and scrapes of the server's /metrics)", field: func(c *Config) any { return &c.Progress.Interval }},

	{name: "batch.enabled", usage: "send the pending rows as the provider's batches (POST /v1/files, /v1/batches; half the price at OpenAI) instead of one request each: each batch recorded in DIR/" + layout.BatchesName + " before it is submitted, polled, its output written as records; a resume collects the batches still running", field: func(c *Config) any { return &c.Batch.Enabled }},
	{name: "batch.max_requests", usage: "requests in one batch input file at most (OpenAI's limit: 50000)", field: func(c *Config) any { return &c.Batch.MaxRequests }},
	{name: "batch.max_bytes", usage: "bytes of one batch input file at most (OpenAI's limit: 200 MB)", field: func(c *Config) any { return &c.Batch.MaxBytes }},
	{name: "batch.in_flight", usage: "batches submitted and not yet collected at once; the rows in flight are batch.max_requests times this (concurrency is not used)", field: func(c *Config) any { return &c.Batch.InFlight }},
	{name: "batch.poll_interval", usage: "time between two looks at a submitted batch's status", field: func(c *Config) any { return &c.Batch.PollInterval }},
	{name: "batch.completion_window", usage: "the completion_window each batch is created with (OpenAI accepts 24h)", field: func(c *Config) any { return &c.Batch.CompletionWindow }},
	{name: "batch.price_factor", usage: "what the provider bills a batch's tokens, as a share of endpoint.price (OpenAI and most providers: 0.5; 1: the same as one request each); the run's cost and each record's use it", field: func(c *Config) any { return &c.Batch.PriceFactor }},
	{name: "hidden_states.enabled", usage: "after the generation, prefill every record with token ids (generation.return_token_ids) again on a server run with vLLM's extract_hidden_states method and keep its checked hidden-state file under DIR/hidden, exactly once", field: func(c *Config) any { return &c.Hidden.Enabled }},
	{name: "hidden_states.dir", usage: "the extraction server's shared_storage_path as this machine sees it; this job's alone (the files it leaves there are removed)", field: func(c *Config) any { return &c.Hidden.Dir }},
	{name: "hidden_states.base_url", url: true, usage: "root URL of the extraction server; empty: the first endpoint.base_url", field: func(c *Config) any { return &c.Hidden.BaseURL }},
	{name: "hidden_states.layers", usage: "layers each file must hold per token: the count of eagle_aux_hidden_state_layer_ids the server was started with", field: func(c *Config) any { return &c.Hidden.Layers }},
	{name: "hidden_states.hidden_size", usage: "the target's hidden size each file must hold per layer", field: func(c *Config) any { return &c.Hidden.HiddenSize }},
	{name: "hidden_states.lock_wait", usage: "how long a file's lock may stay held before the attempt is given up (a server that died writing it)", field: func(c *Config) any { return &c.Hidden.LockWait }},

	{name: "shutdown.grace", usage: "after the first signal, how long in-flight requests may still finish", field: func(c *Config) any { return &c.Shutdown.Grace }},
}

// extraBodyKey is free-form below itself: its contents go to the server as
// written, so it is never checked for unknown keys nor handed to viper (which
// would lowercase the keys inside it).
const extraBodyKey = "generation.extra_body"

// Keys returns every config key's dotted name, in the order of docs/config.md.
func Keys() []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return names
}

// EnvName returns the environment variable that sets a key:
// "endpoint.base_url" is SYNTHGEN_ENDPOINT_BASE_URL.
func EnvName(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

const envPrefix = "SYNTHGEN"

// RegisterFlags adds one flag per config key to fs, named by its dotted key
// (--dataset.limit, --generation.stream=false), with the key's default.
// generation.extra_body is a JSON object string. Only flags the user set
// override the other sources in Load. Calling it twice on one FlagSet panics,
// as pflag does for any redefined flag.
func RegisterFlags(fs *pflag.FlagSet) {
	def := Default()
	for _, k := range keys {
		switch p := k.field(&def).(type) {
		case *string:
			fs.String(k.name, *p, k.usage)
		case *int:
			fs.Int(k.name, *p, k.usage)
		case *int64:
			fs.Int64(k.name, *p, k.usage)
		case *float64:
			fs.Float64(k.name, *p, k.usage)
		case *bool:
			fs.Bool(k.name, *p, k.usage)
		case *time.Duration:
			fs.Duration(k.name, *p, k.usage)
		case *map[string]any:
			fs.String(k.name, canonicalJSON(*p), k.usage)
		case *[]PromptMessage:
			fs.String(k.name, promptMessagesText(*p), k.usage)
		case *concurrencyValue:
			n, auto := *p.n, *p.auto
			fs.Var(&concurrencyValue{n: &n, auto: &auto}, k.name, k.usage)
		case *ResponseFormat:
			fs.String(k.name, p.Value, k.usage)
		case *Price:
			fs.String(k.name, p.Value, k.usage)
		default:
			panic(fmt.Sprintf("config: key %s has unsupported field type %T", k.name, p))
		}
	}
}

// setNested stores v in m under a dotted key, creating the sections on the way.
func setNested(m map[string]any, dotted string, v any) {
	parts := strings.Split(dotted, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
}

// jsonObject decodes s as one JSON object, keeping numbers exact
// (json.Number) so that a large integer such as a seed reaches the server
// unchanged.
func jsonObject(s string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not a JSON object: data after the closing brace")
	}
	if m == nil {
		// "null" decodes to a nil map without error.
		return nil, fmt.Errorf("not a JSON object: null")
	}
	return m, nil
}

var (
	// keyByName indexes keys by dotted name.
	keyByName = map[string]key{}
	// sections holds every proper prefix of a key ("generation", ...).
	sections = map[string]bool{}
	// sectionNames is sections in a fixed order, for deterministic suggestions.
	sectionNames []string
)

func init() {
	for _, k := range keys {
		keyByName[k.name] = k
		parts := strings.Split(k.name, ".")
		for i := 1; i < len(parts); i++ {
			s := strings.Join(parts[:i], ".")
			if !sections[s] {
				sections[s] = true
				sectionNames = append(sectionNames, s)
			}
		}
	}
}

// canonicalJSON is a JSON object flag's default as text: "{}" when empty,
// else the object with sorted keys (encoding/json sorts map keys).
func canonicalJSON(m map[string]any) string {
	if len(m) == 0 {
		return "{}"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "!unencodable: " + err.Error()
	}
	return string(b)
}
