package config

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseConcurrency(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		auto bool
		err  string
	}{
		{in: "200", n: 200},
		{in: "auto", n: DefaultAutoCeiling, auto: true},
		{in: "auto:300", n: 300, auto: true},
		{in: " auto:8 ", n: 8, auto: true},
		{in: "auto:0", err: "the ceiling after auto: must be a positive integer"},
		{in: "auto300", err: "is not an integer, auto or auto:N"},
		{in: "many", err: "is not an integer, auto or auto:N"},
	} {
		n, auto, err := ParseConcurrency(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want one with %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || n != tt.n || auto != tt.auto):
			t.Errorf("%q = %d, %v, %v; want %d, %v", tt.in, n, auto, err, tt.n, tt.auto)
		}
	}
}

// TestConcurrencyAutoFromEverySource: auto reaches the Config from the
// file, the environment and the flag alike, and the manifest's copy says
// auto:N (a fixed number stays a number there).
func TestConcurrencyAutoFromEverySource(t *testing.T) {
	check := func(name string, c Config, n int) {
		t.Helper()
		if !c.ConcurrencyAuto || c.Concurrency != n {
			t.Errorf("%s: concurrency %d auto %v, want auto:%d", name, c.Concurrency, c.ConcurrencyAuto, n)
		}
	}
	c, err := Load(nil, writeFile(t, "run.yaml", "concurrency: auto\n"))
	if err != nil {
		t.Fatal(err)
	}
	check("file", c, DefaultAutoCeiling)
	b, _ := json.Marshal(c.Redacted())
	if !strings.Contains(string(b), `"concurrency":"auto:512"`) {
		t.Errorf("manifest copy: %s", b)
	}

	t.Run("env", func(t *testing.T) {
		t.Setenv("SYNTHGEN_CONCURRENCY", "auto:64")
		c, err := Load(cmdFlags(t), "")
		if err != nil {
			t.Fatal(err)
		}
		check("env", c, 64)
	})
	c, err = Load(cmdFlags(t, "--concurrency", "auto:300"), writeFile(t, "run.yaml", "concurrency: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	check("flag over file", c, 300)
	c, err = Load(cmdFlags(t, "--concurrency", "32"), writeFile(t, "run.yaml", "concurrency: auto\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ConcurrencyAuto || c.Concurrency != 32 {
		t.Errorf("fixed flag over auto file: %d auto %v", c.Concurrency, c.ConcurrencyAuto)
	}
}
