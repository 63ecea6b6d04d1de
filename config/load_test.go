package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// writeFile writes a config file under a fresh temp dir and returns its path.
func writeFile(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// cmdFlags is a flagset as cmd builds it: the config keys plus flags that
// are not config keys, which Load must ignore.
func cmdFlags(t testing.TB, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("synthgen", pflag.ContinueOnError)
	RegisterFlags(fs)
	fs.String("config", "", "config file")
	fs.Bool("force", false, "resume despite a changed config")
	fs.Bool("retry-errors", false, "retry recorded failures")
	fs.String("shard", "", "i/n")
	fs.Bool("quiet", false, "no progress")
	fs.String("log-format", "text", "text|json")
	fs.String("metrics-addr", "", "serve metrics")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// The same non-default settings in each file format.
var formatFiles = map[string]string{
	"run.yaml": `
endpoint:
  base_url: http://gpu:8000/v1
  model: qwen3-8b
  timeout: 45m
dataset:
  path: /data/perfectblend.jsonl
  format: messages
  limit: 25000
generation:
  max_tokens: 4096
  temperature: 0.7
  stream: false
  extra_body:
    top_k: 20
    chat_template_kwargs: {enable_thinking: true}
concurrency: 64
retry: {initial_backoff: 2s}
output:
  dir: /data/synth/pb
  format: jsonl
  sync_interval: 0
`,
	"run.toml": `
concurrency = 64
[endpoint]
base_url = "http://gpu:8000/v1"
model = "qwen3-8b"
timeout = "45m"
[dataset]
path = "/data/perfectblend.jsonl"
format = "messages"
limit = 25000
[generation]
max_tokens = 4096
temperature = 0.7
stream = false
[generation.extra_body]
top_k = 20
chat_template_kwargs = { enable_thinking = true }
[retry]
initial_backoff = "2s"
[output]
dir = "/data/synth/pb"
format = "jsonl"
sync_interval = "0s"
`,
	"run.json": `{
  "endpoint": {"base_url": "http://gpu:8000/v1", "model": "qwen3-8b", "timeout": "45m"},
  "dataset": {"path": "/data/perfectblend.jsonl", "format": "messages", "limit": 25000},
  "generation": {"max_tokens": 4096, "temperature": 0.7, "stream": false,
                 "extra_body": {"top_k": 20, "chat_template_kwargs": {"enable_thinking": true}}},
  "concurrency": 64,
  "retry": {"initial_backoff": "2s"},
  "output": {"dir": "/data/synth/pb", "format": "jsonl", "sync_interval": 0}
}`,
}

func TestLoadFileFormats(t *testing.T) {
	want := Default()
	want.Endpoint.BaseURL = "http://gpu:8000/v1"
	want.Endpoint.Model = "qwen3-8b"
	want.Endpoint.Timeout = 45 * time.Minute
	want.Dataset.Path = "/data/perfectblend.jsonl"
	want.Dataset.Format = "messages"
	want.Dataset.Limit = 25000
	want.Generation.MaxTokens = 4096
	want.Generation.Temperature = 0.7
	want.Generation.Stream = false
	want.Concurrency = 64
	want.Retry.InitialBackoff = 2 * time.Second
	want.Output.Dir = "/data/synth/pb"
	want.Output.Format = "jsonl"
	want.Output.SyncInterval = 0
	wantBody := `{"chat_template_kwargs":{"enable_thinking":true},"top_k":20}`

	for name, body := range formatFiles {
		t.Run(name, func(t *testing.T) {
			got, err := Load(nil, writeFile(t, name, body))
			if err != nil {
				t.Fatal(err)
			}
			if b := canonicalJSON(got.Generation.ExtraBody); b != wantBody {
				t.Errorf("extra_body = %s, want %s", b, wantBody)
			}
			got.Generation.ExtraBody, want.Generation.ExtraBody = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, want)
			}
		})
	}
	t.Run("uppercase extension", func(t *testing.T) {
		if _, err := Load(nil, writeFile(t, "RUN.YML", "concurrency: 3\n")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("empty yaml is all defaults", func(t *testing.T) {
		got, err := Load(nil, writeFile(t, "empty.yaml", "# nothing yet\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, Default()) {
			t.Errorf("got %+v", got)
		}
	})
}

func TestLoadPrecedence(t *testing.T) {
	// Each case sets concurrency, generation.temperature and dataset.limit in
	// some of the sources; the winner is flag > env > file > default.
	tests := []struct {
		name      string
		file      string
		env       map[string]string
		args      []string
		wantConc  int
		wantTemp  float64
		wantLimit int64
	}{
		{name: "defaults", wantConc: 200, wantTemp: 0.6, wantLimit: 0},
		{name: "file", file: "concurrency: 10\ngeneration: {temperature: 0.2}\ndataset: {limit: 7}\n",
			wantConc: 10, wantTemp: 0.2, wantLimit: 7},
		{name: "env over file", file: "concurrency: 10\ngeneration: {temperature: 0.2}\n",
			env:      map[string]string{"SYNTHGEN_CONCURRENCY": "20", "SYNTHGEN_DATASET_LIMIT": "8"},
			wantConc: 20, wantTemp: 0.2, wantLimit: 8},
		{name: "flag over env and file", file: "concurrency: 10\ndataset: {limit: 7}\n",
			env:      map[string]string{"SYNTHGEN_CONCURRENCY": "20", "SYNTHGEN_GENERATION_TEMPERATURE": "1.1"},
			args:     []string{"--concurrency", "30", "--generation.temperature=0.3"},
			wantConc: 30, wantTemp: 0.3, wantLimit: 7},
		{name: "unset flag keeps env", env: map[string]string{"SYNTHGEN_CONCURRENCY": "20"},
			args: []string{"--dataset.limit", "9"}, wantConc: 20, wantTemp: 0.6, wantLimit: 9},
		{name: "empty env is unset", file: "concurrency: 10\n", env: map[string]string{"SYNTHGEN_CONCURRENCY": ""},
			wantConc: 10, wantTemp: 0.6},
		{name: "flag equal to default still wins", file: "concurrency: 10\n", args: []string{"--concurrency=200"},
			wantConc: 200, wantTemp: 0.6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			file := ""
			if tt.file != "" {
				file = writeFile(t, "c.yaml", tt.file)
			}
			got, err := Load(cmdFlags(t, tt.args...), file)
			if err != nil {
				t.Fatal(err)
			}
			if got.Concurrency != tt.wantConc || got.Generation.Temperature != tt.wantTemp || got.Dataset.Limit != tt.wantLimit {
				t.Errorf("concurrency %d temperature %v limit %d, want %d %v %d",
					got.Concurrency, got.Generation.Temperature, got.Dataset.Limit, tt.wantConc, tt.wantTemp, tt.wantLimit)
			}
		})
	}
}

func TestLoadEveryKeyFromEnv(t *testing.T) {
	// Every key must be reachable by its env var; viper only looks up the
	// ones it has a default for.
	values := map[string]string{
		"endpoint.base_url": "https://h:1/v1", "endpoint.model": "m", "endpoint.api_key_env": "K",
		"endpoint.timeout": "1m", "endpoint.metrics_url": "http://h:2/metrics",
		"endpoint.stall_timeout": "0", "endpoint.ca_file": "ca.pem", "endpoint.insecure_skip_verify": "true", "endpoint.price": `{"input":2.5,"output":10}`,
		"endpoint.max_requests_per_minute": "600", "endpoint.max_tokens_per_minute": "200000",
		"dataset.path": "d.jsonl", "dataset.format": "prompt", "dataset.prompt_field": "q", "dataset.id_field": "id", "dataset.params_field": "p",
		"dataset.limit": "5", "dataset.on_bad_row": "fail", "dataset.shard_by": "files",
		"generation.max_tokens": "9", "generation.temperature": "0", "generation.top_p": "0.5", "generation.n": "2",
		"generation.system_prompt": "s", "generation.turns": "all", "generation.on_length": "retry", "generation.tool_choice": "required", "generation.require_reasoning": "true", "generation.return_token_ids": "true", "generation.logprobs": "20", "generation.require_token_ids": "true", "generation.response_format": "json_object", "generation.schema_retries": "3", "generation.stream": "false", "generation.n_per_request": "false", "generation.longest_first": "false", "generation.extra_body": `{"top_k":3}`,
		"prompt.messages": "[]", "concurrency": "4", "retry.max_attempts": "2", "retry.initial_backoff": "3s", "retry.max_backoff": "4s",
		"output.dir": "o", "output.format": "jsonl", "output.shard_size": "6", "output.sync_interval": "0",
		"progress.interval": "7s", "shutdown.grace": "8s",
		"batch.enabled": "true", "batch.max_requests": "10", "batch.max_bytes": "2048", "batch.in_flight": "3",
		"batch.poll_interval": "9s", "batch.completion_window": "24h", "batch.price_factor": "0.4",
		"hidden_states.enabled": "true", "hidden_states.dir": "/hs", "hidden_states.base_url": "http://h:3/v1",
		"hidden_states.layers": "4", "hidden_states.hidden_size": "4096", "hidden_states.lock_wait": "11s",
	}
	for _, k := range Keys() {
		v, ok := values[k]
		if !ok {
			t.Fatalf("test has no value for key %s", k)
		}
		t.Setenv(EnvName(k), v)
	}
	got, err := Load(cmdFlags(t), "")
	if err != nil {
		t.Fatal(err)
	}
	r := got.Redacted()
	b, _ := json.Marshal(r)
	want := `{"batch":{"completion_window":"24h","enabled":true,"in_flight":3,"max_bytes":2048,"max_requests":10,"poll_interval":"9s","price_factor":0.4},"concurrency":4,"dataset":{"format":"prompt","id_field":"id","limit":5,"on_bad_row":"fail","params_field":"p","path":"d.jsonl","prompt_field":"q","shard_by":"files"},` +
		`"endpoint":{"api_key_env":"K","base_url":"https://h:1/v1","ca_file":"ca.pem","insecure_skip_verify":true,"max_requests_per_minute":600,"max_tokens_per_minute":200000,"metrics_url":"http://h:2/metrics","model":"m","price":"{\"input\":2.5,\"output\":10}","stall_timeout":"0s","timeout":"1m0s"},` +
		`"generation":{"extra_body":{"top_k":3},"logprobs":20,"longest_first":false,"max_tokens":9,"n":2,"n_per_request":false,"on_length":"retry","require_reasoning":true,"require_token_ids":true,"response_format":"json_object","return_token_ids":true,"schema_retries":3,"stream":false,"system_prompt":"s","temperature":0,"tool_choice":"required","top_p":0.5,"turns":"all"},` +
		`"hidden_states":{"base_url":"http://h:3/v1","dir":"/hs","enabled":true,"hidden_size":4096,"layers":4,"lock_wait":"11s"},` +
		`"output":{"dir":"o","format":"jsonl","shard_size":6,"sync_interval":"0s"},"progress":{"interval":"7s"},"prompt":{"messages":[]},` +
		`"retry":{"initial_backoff":"3s","max_attempts":2,"max_backoff":"4s"},"shutdown":{"grace":"8s"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestEnvSectionNamesDoNotShadowKeys(t *testing.T) {
	// Variables named like a section are not config keys and must not hide
	// the keys below them (viper's AutomaticEnv would).
	t.Setenv("SYNTHGEN_OUTPUT", "/somewhere")
	t.Setenv("SYNTHGEN_GENERATION", "x")
	t.Setenv("SYNTHGEN_OUTPUT_DIR", "/data/x")
	got, err := Load(cmdFlags(t), writeFile(t, "c.yaml", "generation: {temperature: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Output.Dir != "/data/x" || got.Generation.Temperature != 0 {
		t.Errorf("output.dir %q temperature %v", got.Output.Dir, got.Generation.Temperature)
	}
}

func TestTemperatureZero(t *testing.T) {
	tests := []struct {
		name string
		file string // name and body
		body string
		env  string
		args []string
	}{
		{name: "yaml", file: "t.yaml", body: "generation:\n  temperature: 0\n"},
		{name: "yaml 0.0", file: "t.yaml", body: "generation:\n  temperature: 0.0\n"},
		{name: "toml", file: "t.toml", body: "[generation]\ntemperature = 0\n"},
		{name: "json", file: "t.json", body: `{"generation": {"temperature": 0}}`},
		{name: "env", env: "0"},
		{name: "flag", args: []string{"--generation.temperature=0"}},
		{name: "flag over a file's 0.9", file: "t.yaml", body: "generation: {temperature: 0.9}\n", args: []string{"--generation.temperature", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("SYNTHGEN_GENERATION_TEMPERATURE", tt.env)
			}
			file := ""
			if tt.file != "" {
				file = writeFile(t, tt.file, tt.body)
			}
			got, err := Load(cmdFlags(t, tt.args...), file)
			if err != nil {
				t.Fatal(err)
			}
			if got.Generation.Temperature != 0 {
				t.Errorf("temperature = %v, want 0", got.Generation.Temperature)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, file, body string
		want             string // the whole error message, with the file's base name for its path
	}{
		{"top level", "my.yaml", "concurrency: 5\nconcurency: 10\n",
			`unknown key "concurency" in my.yaml:2 (did you mean "concurrency"?)`},
		{"nested", "my.yaml", "generation:\n  max_tokens: 10\n  temprature: 0.2\n",
			`unknown key "generation.temprature" in my.yaml:3 (did you mean "generation.temperature"?)`},
		{"wrong section", "my.yaml", "output:\n  max_tokens: 10\n",
			`unknown key "output.max_tokens" in my.yaml:2 (did you mean "generation.max_tokens"?)`},
		{"section misspelled", "my.yaml", "generaton:\n  n: 2\n",
			`unknown key "generaton" in my.yaml:1 (did you mean "generation"?)`},
		{"case matters", "my.yaml", "Concurrency: 5\n",
			`unknown key "Concurrency" in my.yaml:1 (did you mean "concurrency"?)`},
		{"nothing close", "my.yaml", "zzzzzzzz: 1\n",
			`unknown key "zzzzzzzz" in my.yaml:1`},
		{"toml nested", "my.toml", "[generation]\ntemprature = 0.2\n",
			`unknown key "generation.temprature" in my.toml (did you mean "generation.temperature"?)`},
		{"json top level", "my.json", `{"concurency": 10}`,
			`unknown key "concurency" in my.json (did you mean "concurrency"?)`},
		{"several, in file order", "my.yaml", "output:\n  dirr: x\nconcurency: 1\n",
			"unknown key \"output.dirr\" in my.yaml:2 (did you mean \"output.dir\"?)\n" +
				`unknown key "concurency" in my.yaml:3 (did you mean "concurrency"?)`},
		{"dotted key", "my.yaml", "generation.temperature: 0\n",
			`my.yaml:1: key "generation.temperature" has a dot in it: nest each part under the one before`},
		{"section holding a value", "my.yaml", "generation: 5\n",
			`my.yaml:1: generation: must be a section of keys, not 5`},
		{"extra_body not a mapping", "my.yaml", "generation:\n  extra_body: [1]\n",
			`my.yaml:2: generation.extra_body: must be a mapping of request fields, not a list`},
		{"empty number", "my.yaml", "generation:\n  temperature:\n",
			`my.yaml:2: generation.temperature: no value: write one, or remove the key to use the default`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.file, tt.body)
			_, err := Load(cmdFlags(t), path)
			if err == nil {
				t.Fatal("no error")
			}
			want := strings.ReplaceAll(tt.want, tt.file, path)
			if err.Error() != want {
				t.Errorf("error\n%s\nwant\n%s", err, want)
			}
		})
	}
	t.Run("typed", func(t *testing.T) {
		path := writeFile(t, "my.yaml", "generation:\n  temprature: 0.2\n")
		_, err := Load(nil, path)
		var uk *UnknownKeyError
		if !errors.As(err, &uk) {
			t.Fatalf("%v is not an *UnknownKeyError", err)
		}
		if uk.File != path || uk.Line != 2 || uk.Key != "generation.temprature" || uk.Suggestion != "generation.temperature" {
			t.Errorf("%+v", uk)
		}
	})
	t.Run("anything goes under extra_body", func(t *testing.T) {
		path := writeFile(t, "my.yaml", "generation:\n  extra_body:\n    whatever_vendor_field: {deep: [1, {x: y}]}\n")
		if _, err := Load(nil, path); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("empty string key is a string", func(t *testing.T) {
		got, err := Load(nil, writeFile(t, "my.yaml", "endpoint:\n  api_key_env:\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got.Endpoint.APIKeyEnv != "" {
			t.Errorf("api_key_env = %q, want empty", got.Endpoint.APIKeyEnv)
		}
	})
}

func TestBadFiles(t *testing.T) {
	tests := []struct {
		name, file, body string
		want             []string // substrings of the error, the file's name among them
	}{
		{"bad yaml", "my.yaml", "concurrency: 5\ndataset:\n  path: a: b\n", []string{"my.yaml: yaml: line 3: mapping values are not allowed"}},
		{"tab indent", "my.yaml", "output:\n\tdir: x\n", []string{"my.yaml: yaml: line 2:"}},
		{"duplicate key", "my.yaml", "concurrency: 1\nconcurrency: 2\n", []string{"my.yaml: ", `"concurrency" already defined`}},
		{"yaml list at top", "my.yaml", "- a\n- b\n", []string{"my.yaml:1: the top level must be a mapping of keys, not a list"}},
		{"two yaml documents", "my.yaml", "concurrency: 1\n---\nconcurrency: 2\n", []string{"my.yaml:2: a second YAML document"}},
		{"bad toml", "my.toml", "concurrency = 1\n[output\ndir = 'x'\n", []string{"my.toml:2:", "toml:"}},
		{"bad json", "my.json", "{\n  \"concurrency\": 1,\n  }\n", []string{"my.json: line 3 col 3:"}},
		{"json trailing data", "my.json", `{"concurrency": 1} {}`, []string{"my.json:1: data after the top-level object"}},
		{"json not an object", "my.json", `[1]`, []string{"my.json: the top level must be an object of keys, not a list"}},
		{"empty json", "my.json", ``, []string{"my.json: empty file"}},
		{"unsupported extension", "my.ini", "concurrency=1\n", []string{"my.ini", `unsupported extension ".ini"`}},
		{"no extension", "myconfig", "concurrency: 1\n", []string{"myconfig", "no extension"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.file, tt.body)
			_, err := Load(nil, path)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), strings.ReplaceAll(w, tt.file, path)) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := Load(nil, path)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v: want not-exist naming %s", err, path)
		}
	})
}

func TestLoadValueErrors(t *testing.T) {
	tests := []struct {
		name string
		file string // yaml body, "" for none
		env  map[string]string
		args []string
		want string // exact message; FILE stands for the file's path
	}{
		{name: "int from env", env: map[string]string{"SYNTHGEN_CONCURRENCY": "abc"},
			want: `env SYNTHGEN_CONCURRENCY: concurrency: "abc" is not an integer, auto or auto:N (N: the most in flight)`},
		{name: "int from file", file: "concurrency: abc\n",
			want: `FILE:1: concurrency: "abc" is not an integer, auto or auto:N (N: the most in flight)`},
		{name: "auto ceiling not a number", file: "concurrency: auto:many\n",
			want: `FILE:1: concurrency: "auto:many": the ceiling after auto: must be a positive integer, e.g. auto:512`},
		{name: "fraction for concurrency", file: "concurrency: 2.5\n",
			want: `FILE:1: concurrency: 2.5 is not an integer; write a positive integer, auto or auto:N`},
		{name: "fraction for int", file: "dataset:\n  limit: 1.5\n",
			want: `FILE:2: dataset.limit: 1.5 is not an integer`},
		{name: "mapping for int", file: "generation:\n  n: {a: 1}\n",
			want: `FILE:2: generation.n: expected an integer, not a mapping`},
		{name: "float from env", env: map[string]string{"SYNTHGEN_GENERATION_TOP_P": "high"},
			want: `env SYNTHGEN_GENERATION_TOP_P: generation.top_p: "high" is not a number`},
		{name: "nan", file: "generation: {temperature: .nan}\n",
			want: `FILE:1: generation.temperature: NaN is not a finite number`},
		{name: "bool from env", env: map[string]string{"SYNTHGEN_GENERATION_STREAM": "yes please"},
			want: `env SYNTHGEN_GENERATION_STREAM: generation.stream: "yes please" is not true or false`},
		{name: "duration without unit", file: "endpoint:\n  timeout: 30\n",
			want: `FILE:2: endpoint.timeout: 30 has no unit: write e.g. "30s" or "30m"`},
		{name: "duration string without unit", env: map[string]string{"SYNTHGEN_RETRY_MAX_BACKOFF": "60"},
			want: `env SYNTHGEN_RETRY_MAX_BACKOFF: retry.max_backoff: "60" has no unit: write e.g. "60s" or "60m"`},
		{name: "not a duration", file: "shutdown: {grace: soon}\n",
			want: `FILE:1: shutdown.grace: "soon" is not a duration such as "30s", "5m" or "1h30m"`},
		{name: "list for string", file: "output: {dir: [a, b]}\n",
			want: `FILE:1: output.dir: expected a string, not a list`},
		{name: "extra_body flag not json", args: []string{"--generation.extra_body", "top_k=20"},
			want: `flag --generation.extra_body: generation.extra_body: not a JSON object: invalid character 'o' in literal true (expecting 'r')`},
		{name: "extra_body env an array", env: map[string]string{"SYNTHGEN_GENERATION_EXTRA_BODY": "[1]"},
			want: `env SYNTHGEN_GENERATION_EXTRA_BODY: generation.extra_body: not a JSON object: json: cannot unmarshal array into Go value of type map[string]interface {}`},
		{name: "validation from file", file: "output:\n  dir: x\n  format: csv\n",
			want: `FILE:3: output.format: "csv" is not one of jsonl, parquet`},
		{name: "validation from flag", args: []string{"--concurrency", "0"},
			want: `flag --concurrency: concurrency: 0 is less than 1`},
		{name: "validation from env", env: map[string]string{"SYNTHGEN_OUTPUT_SHARD_SIZE": "-1"},
			want: `env SYNTHGEN_OUTPUT_SHARD_SIZE: output.shard_size: -1 is less than 1`},
		{name: "cross-key rule names the file that set the other key", file: "dataset:\n  format: prompt\n",
			want: `FILE:2: dataset.prompt_field: required when dataset.format is "prompt"`},
		{name: "several", file: "concurrency: 0\noutput: {format: csv}\n",
			want: "FILE:1: concurrency: 0 is less than 1\nFILE:2: output.format: \"csv\" is not one of jsonl, parquet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			file := ""
			if tt.file != "" {
				file = writeFile(t, "my.yaml", tt.file)
			}
			_, err := Load(cmdFlags(t, tt.args...), file)
			if err == nil {
				t.Fatal("no error")
			}
			if want := strings.ReplaceAll(tt.want, "FILE", file); err.Error() != want {
				t.Errorf("error\n%s\nwant\n%s", err, want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%v holds no *FieldError", err)
			}
		})
	}
}

func TestLoadIgnoresNonConfigFlags(t *testing.T) {
	fs := cmdFlags(t, "--config", "x.yaml", "--force", "--retry-errors", "--shard", "1/4", "--quiet",
		"--log-format", "json", "--metrics-addr", ":9090", "--output.dir", "/data/x")
	got, err := Load(fs, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Output.Dir != "/data/x" {
		t.Errorf("output.dir = %q", got.Output.Dir)
	}
}

func TestExtraBody(t *testing.T) {
	t.Run("yaml keeps keys as written", func(t *testing.T) {
		path := writeFile(t, "e.yaml", `
generation:
  extra_body:
    top_k: 20
    chat_template_kwargs:
      enable_thinking: false
    vendorField: {CamelCase: [1, 2.5, "x", null]}
    seed: 12345678901234567
`)
		got, err := Load(nil, path)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"chat_template_kwargs":{"enable_thinking":false},"seed":12345678901234567,"top_k":20,"vendorField":{"CamelCase":[1,2.5,"x",null]}}`
		if s := canonicalJSON(got.Generation.ExtraBody); s != want {
			t.Errorf("got  %s\nwant %s", s, want)
		}
	})
	t.Run("flag", func(t *testing.T) {
		path := writeFile(t, "e.yaml", "generation:\n  extra_body: {top_k: 5}\n")
		got, err := Load(cmdFlags(t, "--generation.extra_body", `{"top_k":20, "seed": 98765432109876543210}`), path)
		if err != nil {
			t.Fatal(err)
		}
		// Large integers stay exact: a seed must reach the server unchanged.
		if s := canonicalJSON(got.Generation.ExtraBody); s != `{"seed":98765432109876543210,"top_k":20}` {
			t.Errorf("got %s", s)
		}
	})
	t.Run("flag and yaml hash alike", func(t *testing.T) {
		a, err := Load(nil, writeFile(t, "e.yaml", "generation:\n  extra_body: {b: 1, a: {y: true, x: 2}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Load(cmdFlags(t, "--generation.extra_body", `{"a":{"x":2,"y":true},"b":1}`), "")
		if err != nil {
			t.Fatal(err)
		}
		// encoding/json sorts map keys: equal bodies encode equal.
		ka, _ := json.Marshal(a.Generation.ExtraBody)
		kb, _ := json.Marshal(b.Generation.ExtraBody)
		if string(ka) != string(kb) {
			t.Errorf("yaml %s != flag %s", ka, kb)
		}
	})
	t.Run("empty flag default is an empty body", func(t *testing.T) {
		got, err := Load(cmdFlags(t), "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation.ExtraBody == nil || len(got.Generation.ExtraBody) != 0 {
			t.Errorf("extra_body = %#v", got.Generation.ExtraBody)
		}
	})
	t.Run("a field typed keys own is refused", func(t *testing.T) {
		_, err := Load(cmdFlags(t, "--generation.extra_body", `{"temperature":0}`), "")
		want := `flag --generation.extra_body: generation.extra_body: "temperature" is set by generation.temperature; set it there`
		if err == nil || err.Error() != want {
			t.Errorf("error %v, want %s", err, want)
		}
	})
}

// FuzzLoadYAML feeds arbitrary bytes as a YAML config file: Load must not
// panic, and must either return a valid Config or an error naming the file.
func FuzzLoadYAML(f *testing.F) {
	for _, seed := range []string{
		formatFiles["run.yaml"],
		"",
		"concurrency: 0\n",
		"concurency: 1\n",
		"generation:\n  temperature: 0\n  extra_body: {a: [1, {b: .inf}]}\n",
		"generation: {extra_body: {1: x, ~: y}}\n",
		"a: &a [*a]\n",
		"- 1\n",
		"dataset: {format: prompt}\n",
		"endpoint: {timeout: 30, base_url: 'ftp://x'}\n",
		"x: &x {a: &y {b: 1}}\ny: *x\n",
		"retry: {initial_backoff: 2m, max_backoff: 1m}\n",
		"\t\n: :",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := os.CreateTemp(dir, "fuzz-*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		path := file.Name()
		defer os.Remove(path)
		if _, err := file.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(nil, path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file %s: %v", path, err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load returned a config that fails Validate: %v", err)
		}
		if _, err := json.Marshal(cfg.Redacted()); err != nil {
			t.Fatalf("Redacted does not encode: %v", err)
		}
	})
}

// TestUnknownEnv: a SYNTHGEN_* variable that names no key changes nothing,
// so it is reported with the nearest variable that is read, as an unknown
// key in the file is; the keys' own variables and the other names synthgen
// reads are not.
func TestUnknownEnv(t *testing.T) {
	environ := []string{
		"SYNTHGEN_CONCURENCY=5",
		"SYNTHGEN_GENERATION_TEMPRATURE=0.2",
		"SYNTHGEN_MAX_TOKENS=64",
		"SYNTHGEN_CACHEDIR=/tmp/c",
		"SYNTHGEN_ZZZ=1",
		"SYNTHGEN_OUTPUT_DIR=/data/x",     // a key
		"SYNTHGEN_CACHE_DIR=/tmp/c",       // read by the Hub cache
		"SYNTHGEN_API_KEY=secret",         // named by endpoint.api_key_env
		"SYNTHGEN_TEST_DUCKDB_MODULES=/x", // the test suite's, as CI sets it
		"SYNTHGENERATION=1",               // not the prefix
		"HOME=/root",
		"CONCURRENCY=5",
	}
	got := map[string]string{}
	for _, e := range UnknownEnv(environ, "SYNTHGEN_CACHE_DIR", "SYNTHGEN_API_KEY") {
		got[e.Name] = e.Suggestion
		t.Log(e)
	}
	want := map[string]string{
		"SYNTHGEN_CONCURENCY":            "SYNTHGEN_CONCURRENCY",
		"SYNTHGEN_GENERATION_TEMPRATURE": "SYNTHGEN_GENERATION_TEMPERATURE",
		"SYNTHGEN_MAX_TOKENS":            "SYNTHGEN_GENERATION_MAX_TOKENS",
		"SYNTHGEN_CACHEDIR":              "SYNTHGEN_CACHE_DIR",
		"SYNTHGEN_ZZZ":                   "",
	}
	if len(got) != len(want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	for name, sugg := range want {
		if s, ok := got[name]; !ok || s != sugg {
			t.Errorf("%s: reported %v, suggestion %q; want suggestion %q", name, ok, s, sugg)
		}
	}
	e := &UnknownEnvError{Name: "SYNTHGEN_CONCURENCY", Suggestion: "SYNTHGEN_CONCURRENCY"}
	if msg := e.Error(); !strings.Contains(msg, "SYNTHGEN_CONCURENCY") || !strings.Contains(msg, "did you mean SYNTHGEN_CONCURRENCY?") {
		t.Errorf("message %q", msg)
	}
}
