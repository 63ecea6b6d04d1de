package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestRegisterFlags(t *testing.T) {
	fs := pflag.NewFlagSet("synthgen", pflag.ContinueOnError)
	RegisterFlags(fs)

	t.Run("every flag explains itself", func(t *testing.T) {
		n := 0
		fs.VisitAll(func(f *pflag.Flag) {
			n++
			if f.Usage == "" {
				t.Errorf("--%s has no usage", f.Name)
			}
			if _, ok := keyByName[f.Name]; !ok {
				t.Errorf("--%s is not a config key", f.Name)
			}
		})
		if n != len(Keys()) {
			t.Errorf("%d flags for %d keys", n, len(Keys()))
		}
	})
	t.Run("every key has a flag", func(t *testing.T) {
		for _, k := range Keys() {
			if fs.Lookup(k) == nil {
				t.Errorf("key %s has no flag --%s", k, k)
			}
		}
	})
	t.Run("flag defaults are the defaults", func(t *testing.T) {
		// Parse nothing, then force every flag to count as set at its own
		// default: Load must then give Default() exactly.
		all := pflag.NewFlagSet("all", pflag.ContinueOnError)
		RegisterFlags(all)
		all.VisitAll(func(f *pflag.Flag) {
			if err := all.Set(f.Name, f.DefValue); err != nil {
				t.Fatalf("--%s=%s: %v", f.Name, f.DefValue, err)
			}
		})
		got, err := Load(all, "")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, Default()) {
			t.Errorf("got %+v\nwant %+v", got, Default())
		}
	})
}

func TestFlagsAsDesignShows(t *testing.T) {
	fs := cmdFlags(t, "--dataset.limit", "1000", "--output.dir", "/data/x", "--generation.stream=false",
		"--concurrency", "64", "--endpoint.timeout", "1h30m", "--generation.extra_body", `{"top_k":20}`)
	got, err := Load(fs, "")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Dataset.Limit = 1000
	want.Output.Dir = "/data/x"
	want.Generation.Stream = false
	want.Concurrency = 64
	want.Endpoint.Timeout = 90 * time.Minute
	if canonicalJSON(got.Generation.ExtraBody) != `{"top_k":20}` {
		t.Errorf("extra_body = %v", got.Generation.ExtraBody)
	}
	got.Generation.ExtraBody, want.Generation.ExtraBody = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestFlagRejectsBadInt(t *testing.T) {
	fs := pflag.NewFlagSet("synthgen", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--concurrency", "abc"}); err == nil {
		t.Fatal("--concurrency abc parsed")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"endpoint.base_url": "SYNTHGEN_ENDPOINT_BASE_URL",
		"concurrency":       "SYNTHGEN_CONCURRENCY",
		"dataset.limit":     "SYNTHGEN_DATASET_LIMIT",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestNearestKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"concurency", "concurrency"},
		{"concurrancy", "concurrency"},
		{"generation.temprature", "generation.temperature"},
		{"generation.max_token", "generation.max_tokens"},
		{"temperature", "generation.temperature"},
		{"output.shardsize", "output.shard_size"},
		{"dataset.formt", "dataset.format"},
		{"output.formt", "output.format"},
		{"retry.backoff", "retry.max_backoff"},
		{"endpoint.url", "endpoint.base_url"},
		{"outptu", "output"},
		{"banana", ""},
		{"", ""},
		{"q", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := nearestKey(tt.in); got != tt.want {
				t.Errorf("nearestKey(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"concurency", "concurrency", 1}, {"ab", "ba", 2}} {
		if got := levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := levenshtein(tt.b, tt.a); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}
