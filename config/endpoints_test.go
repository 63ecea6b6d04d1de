package config

import (
	"slices"
	"strings"
	"testing"
)

// TestSeveralBaseURLs: endpoint.base_url takes one URL, a list in the file,
// or a comma-separated flag or environment value, and each form yields the
// same entries.
func TestSeveralBaseURLs(t *testing.T) {
	want := []string{"http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"}
	t.Run("yaml list", func(t *testing.T) {
		cfg, err := Load(nil, writeFile(t, "c.yaml", "endpoint:\n  base_url:\n    - http://a:8000/v1\n    - http://b:8000/v1\n    - http://c:8000/v1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Endpoint.BaseURLs(); !slices.Equal(got, want) {
			t.Errorf("BaseURLs = %q, want %q", got, want)
		}
	})
	t.Run("json list", func(t *testing.T) {
		cfg, err := Load(nil, writeFile(t, "c.json", `{"endpoint": {"base_url": ["http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Endpoint.BaseURLs(); !slices.Equal(got, want) {
			t.Errorf("BaseURLs = %q, want %q", got, want)
		}
	})
	t.Run("flag", func(t *testing.T) {
		cfg, err := Load(cmdFlags(t, "--endpoint.base_url", "http://a:8000/v1, http://b:8000/v1,http://c:8000/v1"), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Endpoint.BaseURLs(); !slices.Equal(got, want) {
			t.Errorf("BaseURLs = %q, want %q", got, want)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("SYNTHGEN_ENDPOINT_BASE_URL", strings.Join(want, ","))
		cfg, err := Load(cmdFlags(t), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Endpoint.BaseURLs(); !slices.Equal(got, want) {
			t.Errorf("BaseURLs = %q, want %q", got, want)
		}
	})
	t.Run("one", func(t *testing.T) {
		cfg, err := Load(nil, writeFile(t, "c.yaml", "endpoint:\n  base_url: http://a:8000/v1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Endpoint.BaseURLs(); !slices.Equal(got, want[:1]) || cfg.Endpoint.BaseURL != want[0] {
			t.Errorf("BaseURLs = %q (BaseURL %q), want %q", got, cfg.Endpoint.BaseURL, want[:1])
		}
	})
	t.Run("redacted each", func(t *testing.T) {
		cfg, err := Load(cmdFlags(t, "--endpoint.base_url", "http://u:secret@a:8000/v1,http://u:hidden@b:8000/v1"), "")
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.Redacted()["endpoint"].(map[string]any)["base_url"].(string)
		if strings.Contains(got, "secret") || strings.Contains(got, "hidden") || !strings.Contains(got, "b:8000") {
			t.Errorf("Redacted base_url = %q: want both passwords masked, both hosts kept", got)
		}
	})
}

// TestBadBaseURLLists: a bad entry, a repeated one, a list entry that is
// not a string, and metrics URLs that do not pair with the base URLs are
// refused, each naming the entry and where it came from.
func TestBadBaseURLLists(t *testing.T) {
	for _, tt := range []struct {
		name, flag, file string
		want             []string
	}{
		{name: "bad entry", flag: "http://a:8000/v1,ftp://b/v1", want: []string{"endpoint.base_url[2]", `"ftp://b/v1" is not an http://`}},
		{name: "empty entry", flag: "http://a:8000/v1,,http://c/v1", want: []string{"endpoint.base_url[2]", "is empty"}},
		{name: "duplicate", flag: "http://a:8000/v1,http://b/v1,http://a:8000/v1/", want: []string{"endpoint.base_url[3]", "repeats entry 1"}},
		{name: "not a string", file: "endpoint:\n  base_url: [http://a/v1, 3]\n", want: []string{"c.yaml:2", "entry 2: expected a string"}},
		{name: "comma in entry", file: "endpoint:\n  base_url: [\"http://a/v1,http://b/v1\"]\n", want: []string{"entry 1", "holds a comma"}},
		{name: "metrics count", file: "endpoint:\n  base_url: [http://a/v1, http://b/v1]\n  metrics_url: http://a/metrics\n", want: []string{"c.yaml:3", "endpoint.metrics_url: has 1 entries for 2 base_urls"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = writeFile(t, "c.yaml", tt.file)
			}
			var args []string
			if tt.flag != "" {
				args = []string{"--endpoint.base_url", tt.flag}
			}
			_, err := Load(cmdFlags(t, args...), file)
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
