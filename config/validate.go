package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FieldError says which config key is wrong and why:
// `output.format: "csv" is not one of jsonl, parquet`.
type FieldError struct {
	Key    string // dotted key, e.g. "output.format"
	Value  any    // the offending value (masked where it may be a secret)
	Reason string // what is wrong, for a person; it quotes the value where that helps
	// related names other keys that took part in a cross-key rule, so Load
	// can say where the value came from even when Key itself was not set.
	related []string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Reason }

// Enumerated values, in the order their errors list them.
var (
	DatasetFormats = []string{"auto", "sharegpt", "messages", "prompt", "alpaca", "openai-batch", "rows"}
	OutputFormats  = []string{"jsonl", "parquet"}
	BadRowPolicies = []string{"skip", "fail"}
	// ShardBys are the values of dataset.shard_by.
	ShardBys       = []string{"rows", "files"}
	TurnsPolicies  = []string{"first", "all"}
	LengthPolicies = []string{"keep", "retry"}
	// ToolChoices are generation.tool_choice's values, OpenAI's.
	ToolChoices = []string{"auto", "none", "required"}
)

// bodyKeysOwnedByConfig are request fields that typed keys already set;
// the same field in extra_body would make what the server receives depend
// on merge order instead of on what the config says.
var bodyKeysOwnedByConfig = map[string]string{
	"model":       "endpoint.model",
	"messages":    "the dataset",
	"stream":      "generation.stream",
	"n":           "generation.n",
	"max_tokens":  "generation.max_tokens",
	"temperature": "generation.temperature",
	"top_p":       "generation.top_p",
	// With generation.return_token_ids and generation.logprobs, the
	// record reads these fields' answers: they are asked for there.
	"return_token_ids":           "generation.return_token_ids",
	"logprobs":                   "generation.logprobs",
	"top_logprobs":               "generation.logprobs",
	"return_tokens_as_token_ids": "generation.logprobs",
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks every key and returns nil, one *FieldError, or several
// joined with errors.Join (each found with errors.As or by unwrapping).
// Each section has a check of its own, run in the order the errors are
// listed; a rule over two sections sits with the key it names.
func (c Config) Validate() error {
	k := &checks{}
	c.Endpoint.check(k)
	c.Dataset.check(k)
	c.validatePrompt(k.add)
	c.Generation.check(k)
	c.checkConcurrency(k)
	c.Retry.check(k)
	c.Output.check(k)
	c.Progress.check(k)
	c.Shutdown.check(k)
	c.Batch.check(k)
	c.checkHidden(k)
	if fe := c.validatePrice(); fe != nil {
		k.errs = append(k.errs, fe)
	}
	switch len(k.errs) {
	case 0:
		return nil
	case 1:
		return k.errs[0]
	default:
		return errors.Join(k.errs...)
	}
}

// checks gathers the *FieldErrors of Validate, and holds the rules that
// several sections share.
type checks struct{ errs []error }

func (k *checks) add(key string, v any, reason string, related ...string) {
	k.errs = append(k.errs, &FieldError{Key: key, Value: v, Reason: reason, related: related})
}

func (k *checks) positiveDur(key string, d time.Duration) {
	if d <= 0 {
		k.add(key, d, fmt.Sprintf("%s must be greater than 0", d))
	}
}

func (k *checks) atLeast(key string, v, min int64) {
	if v < min {
		k.add(key, v, fmt.Sprintf("%d is less than %d", v, min))
	}
}

func (k *checks) oneOf(key, v string, allowed []string) {
	if !slices.Contains(allowed, v) {
		k.add(key, v, fmt.Sprintf("%q is not one of %s", v, strings.Join(allowed, ", ")))
	}
}

// notNegative refuses a negative duration; meaning0 says what 0 does.
func (k *checks) notNegative(key string, d time.Duration, meaning0 string) {
	if d < 0 {
		k.add(key, d, fmt.Sprintf("%s is negative%s", d, meaning0))
	}
}

func (k *checks) httpURL(key, v string) {
	u, err := url.Parse(v)
	shown := redactOne(v) // a password in the URL is never shown
	switch {
	case err != nil:
		k.add(key, "(not shown)", fmt.Sprintf("%q is not a URL: %v", shown, errors.Unwrap(err)))
	case u.Scheme != "http" && u.Scheme != "https":
		k.add(key, shown, fmt.Sprintf("%q is not an http:// or https:// URL", shown))
	case u.Host == "":
		k.add(key, shown, fmt.Sprintf("%q has no host", shown))
	case strings.HasPrefix(key, "endpoint.base_url") && (u.RawQuery != "" || u.Fragment != "" || u.ForceQuery):
		// The paths /chat/completions and /models go after the base
		// URL: a query would sit in the middle of them. It is not
		// printed: it may hold a key.
		u.RawQuery, u.Fragment, u.ForceQuery = "", "", false
		k.add(key, "(not shown)", fmt.Sprintf("%s has a query or a fragment (?... or #...), which would end up in the middle of every request's URL: give the base URL alone (e.g. %s) and the API key through endpoint.api_key_env", redactOne(u.String())+"?…", redactOne(u.String())))
	}
}

// urlList checks a list of URLs, each named key[i] when there are several.
func (k *checks) urlList(key string, list []string) {
	seen := map[string]int{}
	for i, u := range list {
		name := key
		if len(list) > 1 {
			name = fmt.Sprintf("%s[%d]", key, i+1)
		}
		if u == "" {
			k.add(name, u, "is empty (a stray comma?): write each URL once, comma-separated, or as a list in the file")
			continue
		}
		k.httpURL(name, u)
		norm := strings.TrimRight(u, "/")
		if j, dup := seen[norm]; dup {
			k.add(name, redactOne(u), fmt.Sprintf("%q repeats entry %d: each endpoint once", redactOne(u), j))
		}
		seen[norm] = i + 1
	}
}

func (e EndpointConfig) check(k *checks) {
	bases := e.BaseURLs()
	if len(bases) == 0 {
		k.httpURL("endpoint.base_url", e.BaseURL)
	}
	k.urlList("endpoint.base_url", bases)
	if metrics := e.MetricsURLs(); len(metrics) > 0 {
		k.urlList("endpoint.metrics_url", metrics)
		if len(bases) > 1 && len(metrics) != len(bases) {
			k.add("endpoint.metrics_url", e.MetricsURL, fmt.Sprintf("has %d entries for %d base_urls: give one per base_url, in the same order, or leave it empty to derive each from its base_url", len(metrics), len(bases)), "endpoint.base_url")
		}
	}
	if e.APIKeyEnv != "" && !envNameRE.MatchString(e.APIKeyEnv) {
		// The value is not echoed: a string that is not a variable name is
		// most likely the key itself pasted in by mistake.
		k.add("endpoint.api_key_env", "(hidden)", "must be the name of an environment variable (letters, digits, _), not the key itself")
	}
	k.positiveDur("endpoint.timeout", e.Timeout)
	if e.MaxRequestsPerMinute < 0 {
		k.add("endpoint.max_requests_per_minute", e.MaxRequestsPerMinute, fmt.Sprintf("%d is negative (0: no limit)", e.MaxRequestsPerMinute))
	}
	if e.MaxTokensPerMinute < 0 {
		k.add("endpoint.max_tokens_per_minute", e.MaxTokensPerMinute, fmt.Sprintf("%d is negative (0: no limit)", e.MaxTokensPerMinute))
	}
	k.notNegative("endpoint.stall_timeout", e.StallTimeout, " (0 turns the stall check off)")
}

// check refuses what a dataset section cannot mean. An empty dataset.path
// (the default: there is none) is run's to refuse, as "no dataset given":
// a config without one is still a config, and the message is about the run.
func (d DatasetConfig) check(k *checks) {
	k.oneOf("dataset.format", d.Format, DatasetFormats)
	if d.Format == "prompt" && d.PromptField == "" {
		k.add("dataset.prompt_field", d.PromptField, `required when dataset.format is "prompt"`, "dataset.format")
	}
	k.atLeast("dataset.limit", d.Limit, 0)
	k.oneOf("dataset.on_bad_row", d.OnBadRow, BadRowPolicies)
	k.oneOf("dataset.shard_by", d.ShardBy, ShardBys)
}

func (g GenerationConfig) check(k *checks) {
	k.atLeast("generation.max_tokens", int64(g.MaxTokens), 1)
	if !(g.Temperature >= 0) || math.IsInf(g.Temperature, 0) {
		k.add("generation.temperature", g.Temperature, fmt.Sprintf("%v must be a finite number at least 0", g.Temperature))
	}
	if !(g.TopP > 0 && g.TopP <= 1) {
		k.add("generation.top_p", g.TopP, fmt.Sprintf("%v is not greater than 0 and at most 1", g.TopP))
	}
	k.atLeast("generation.n", int64(g.N), 1)
	k.oneOf("generation.turns", g.Turns, TurnsPolicies)
	k.oneOf("generation.on_length", g.OnLength, LengthPolicies)
	k.oneOf("generation.tool_choice", g.ToolChoice, ToolChoices)
	switch {
	case g.Logprobs < 0 || g.Logprobs > MaxLogprobs:
		k.add("generation.logprobs", g.Logprobs, fmt.Sprintf("%d is not between 0 (no logprobs) and %d", g.Logprobs, MaxLogprobs))
	case g.Logprobs > 0 && !g.ReturnTokenIDs:
		k.add("generation.logprobs", g.Logprobs, "needs generation.return_token_ids: true (the logprobs are kept token by token beside token_ids)", "generation.return_token_ids")
	}
	if g.RequireTokenIDs && !g.ReturnTokenIDs {
		k.add("generation.require_token_ids", g.RequireTokenIDs, "needs generation.return_token_ids: true (no ids are asked for, so none can be required)", "generation.return_token_ids")
	}
	for _, key := range slices.Sorted(maps.Keys(g.ExtraBody)) {
		if owner, ok := bodyKeysOwnedByConfig[key]; ok {
			k.add("generation.extra_body", key, fmt.Sprintf("%q is set by %s; set it there", key, owner))
		}
	}
	k.atLeast("generation.schema_retries", int64(g.SchemaRetries), 0)
	g.checkBodyShape(k)
}

// checkBodyShape refuses a shape extra_body asks beside
// generation.response_format, and a body that is no JSON.
func (g GenerationConfig) checkBodyShape(k *checks) {
	if g.ResponseFormat.Set() {
		// The answers are checked against generation.response_format: a
		// shape of extra_body's own would make the server answer another.
		for _, key := range []string{"response_format", "guided_json", "structured_outputs"} {
			if _, ok := g.ExtraBody[key]; ok {
				k.add("generation.extra_body", key, fmt.Sprintf("%q asks for a shape of its own, and generation.response_format is set: keep one (the answers are checked against generation.response_format)", key), responseFormatKey)
			}
		}
	}
	if _, err := json.Marshal(g.ExtraBody); err != nil {
		k.add("generation.extra_body", g.ExtraBody, fmt.Sprintf("cannot be sent as JSON: %v", err))
	}
}

func (c Config) checkConcurrency(k *checks) {
	if c.ConcurrencyAuto && c.Concurrency < 1 {
		k.add("concurrency", FormatConcurrency(c.Concurrency, true), fmt.Sprintf("the ceiling %d must be at least 1, e.g. auto:512", c.Concurrency))
		return
	}
	k.atLeast("concurrency", int64(c.Concurrency), 1)
}

func (r RetryConfig) check(k *checks) {
	k.atLeast("retry.max_attempts", int64(r.MaxAttempts), 1)
	k.positiveDur("retry.initial_backoff", r.InitialBackoff)
	k.positiveDur("retry.max_backoff", r.MaxBackoff)
	if r.InitialBackoff > 0 && r.MaxBackoff > 0 && r.InitialBackoff > r.MaxBackoff {
		k.add("retry.initial_backoff", r.InitialBackoff,
			fmt.Sprintf("%s is more than retry.max_backoff %s", r.InitialBackoff, r.MaxBackoff), "retry.max_backoff")
	}
}

func (o OutputConfig) check(k *checks) {
	if strings.TrimSpace(o.Dir) == "" {
		k.add("output.dir", o.Dir, "must not be empty")
	}
	k.oneOf("output.format", o.Format, OutputFormats)
	k.atLeast("output.shard_size", int64(o.ShardSize), 1)
	k.notNegative("output.sync_interval", o.SyncInterval, " (0 means fsync every record)")
}

func (p ProgressConfig) check(k *checks) { k.positiveDur("progress.interval", p.Interval) }

func (s ShutdownConfig) check(k *checks) { k.notNegative("shutdown.grace", s.Grace, "") }

// check checks the batch keys only when the batch mode is on: their
// defaults are not read otherwise.
func (b BatchConfig) check(k *checks) {
	if !b.Enabled {
		return
	}
	k.atLeast("batch.max_requests", int64(b.MaxRequests), 1)
	k.atLeast("batch.max_bytes", b.MaxBytes, 1024)
	k.atLeast("batch.in_flight", int64(b.InFlight), 1)
	k.positiveDur("batch.poll_interval", b.PollInterval)
	if strings.TrimSpace(b.CompletionWindow) == "" {
		k.add("batch.completion_window", b.CompletionWindow, "must not be empty (OpenAI accepts 24h)")
	}
	if !(b.PriceFactor > 0 && b.PriceFactor <= 1) {
		k.add("batch.price_factor", b.PriceFactor, fmt.Sprintf("%v is not greater than 0 and at most 1 (OpenAI bills a batch at 0.5)", b.PriceFactor))
	}
}

// redactOne masks a URL's password for a message.
func redactOne(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

// checkHidden checks hidden_states.* only when the pass is on; it needs
// generation.return_token_ids, so it sits with the key it names.
func (c Config) checkHidden(k *checks) {
	h := c.Hidden
	if !h.Enabled {
		return
	}
	if h.Dir == "" {
		k.add("hidden_states.dir", h.Dir, "must name the extraction server's shared_storage_path as this machine sees it")
	}
	if h.Layers <= 0 {
		k.add("hidden_states.layers", h.Layers, "must be the count of the server's eagle_aux_hidden_state_layer_ids (> 0)")
	}
	if h.HiddenSize <= 0 {
		k.add("hidden_states.hidden_size", h.HiddenSize, "must be the target's hidden size (> 0)")
	}
	if h.LockWait <= 0 {
		k.add("hidden_states.lock_wait", h.LockWait, "must be positive")
	}
	if !c.Generation.ReturnTokenIDs {
		k.add("hidden_states.enabled", h.Enabled, "needs generation.return_token_ids: the states are of the ids the server gave")
	}
}
