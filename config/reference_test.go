package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// referencePath is the page of every config key, written from the key table
// by referencePage: the table is the one list of keys, so the page a user
// reads is made from it instead of being kept by hand beside it.
var referencePath = filepath.Join("..", "docs", "config.md")

var updateReference = flag.Bool("update", false, "rewrite docs/config.md from the key table")

// TestConfigReferenceIsCurrent fails when docs/config.md is not what the key
// table and Default() make: a key added, removed, redescribed or given
// another default without regenerating the page (make docs).
func TestConfigReferenceIsCurrent(t *testing.T) {
	want := referencePage()
	if *updateReference {
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: regenerate it with `make docs` (go test ./config -run TestConfigReference -update)", referencePath)
	}
}

// referencePage renders every key of the table, section by section, with its
// default and its --help text, then the same defaults as one config file.
func referencePage() string {
	var b strings.Builder
	b.WriteString(`<!-- Generated from config/keys.go's key table and config.Default() by
     config/reference_test.go. Do not edit: run ` + "`make docs`" + `
     (go test ./config -run TestConfigReference -update) after changing a key. -->

# Every config key

Each key is set in the config file (YAML, TOML or JSON; ` + "`--config FILE`" + `), as a flag of
` + "`synthgen run`" + ` with its dotted name (` + "`--generation.max_tokens 4096`" + `) and as an environment
variable (the second name under each key). A flag wins over the environment, which wins over the
file; an unknown key in a file or a flag is refused (exit 2) with the nearest key, and a
` + "`SYNTHGEN_*`" + ` variable that names no key is warned about. A duration is Go's (` + "`90s`, `2m`, `1h30m`" + `).
The meanings are ` + "`synthgen run --help`" + `'s. The flags of ` + "`synthgen run`" + ` that are not keys are in
[reference.md](reference.md#flags-of-synthgen-run-that-are-not-keys).

`)
	def := Default()
	sections := keySections()
	for _, s := range sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", s, s)
	}
	b.WriteString("- [All the defaults as one file](#all-the-defaults-as-one-file)\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n| key | default | meaning |\n| --- | --- | --- |\n", s)
		for _, k := range keys {
			if section(k.name) != s {
				continue
			}
			d := defaultText(k, &def)
			if d == "" {
				d = "(empty)"
			} else {
				d = "`" + d + "`"
			}
			fmt.Fprintf(&b, "| `%s`<br>`%s` | %s | %s |\n", k.name, EnvName(k.name), d, cell(k.usage))
		}
	}
	b.WriteString("\n## All the defaults as one file\n\nThis file loads (`synthgen run --config`) to the defaults above; `config/config_test.go` checks it.\n\n```yaml\n")
	for _, s := range sections {
		if s != keyOf(s) {
			fmt.Fprintf(&b, "%s:\n", s)
		}
		for _, k := range keys {
			if section(k.name) != s {
				continue
			}
			if k.name == s {
				fmt.Fprintf(&b, "%s: %s\n", k.name, yamlValue(k, &def))
				continue
			}
			fmt.Fprintf(&b, "  %s: %s\n", strings.TrimPrefix(k.name, s+"."), yamlValue(k, &def))
		}
	}
	b.WriteString("```\n")
	return b.String()
}

// section is a key's first part: "endpoint" of "endpoint.base_url", and a
// top-level key ("concurrency") its own section.
func section(name string) string {
	s, _, _ := strings.Cut(name, ".")
	return s
}

// keyOf returns s when s is a key of its own (a top-level key), else "".
func keyOf(s string) string {
	for _, k := range keys {
		if k.name == s {
			return s
		}
	}
	return ""
}

// keySections lists the sections in the table's order.
func keySections() []string {
	var out []string
	for _, k := range keys {
		if s := section(k.name); len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// defaultText is a key's default as --help shows it, durations shortened
// ("30m", not "30m0s").
func defaultText(k key, def *Config) string {
	switch p := k.field(def).(type) {
	case *string:
		return *p
	case *int:
		return fmt.Sprint(*p)
	case *int64:
		return fmt.Sprint(*p)
	case *float64:
		return fmt.Sprint(*p)
	case *bool:
		return fmt.Sprint(*p)
	case *time.Duration:
		return shortDuration(*p)
	case *map[string]any:
		return canonicalJSON(*p)
	case *[]PromptMessage:
		return promptMessagesText(*p)
	case *concurrencyValue:
		return p.String()
	case *ResponseFormat:
		return p.Value
	case *Price:
		return p.Value
	default:
		panic(fmt.Sprintf("config: key %s has unsupported field type %T", k.name, p))
	}
}

// yamlValue is a key's default as a YAML value: strings quoted where YAML
// needs it (and "" for empty), the others as written.
func yamlValue(k key, def *Config) string {
	v := defaultText(k, def)
	switch k.field(def).(type) {
	case *string, *ResponseFormat, *Price:
		out, err := yaml.Marshal(v)
		if err != nil {
			panic(err)
		}
		return strings.TrimSuffix(string(out), "\n")
	}
	return v
}

func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// cell makes a usage text safe in a Markdown table cell: a | would end the
// cell, and <think> would be read as HTML.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}
