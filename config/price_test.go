package config

import (
	"strings"
	"testing"
)

// TestLoadPrice: endpoint.price read from a file's mapping, in either form,
// and from a flag's JSON object; cached_input unset is nil (priced as input).
func TestLoadPrice(t *testing.T) {
	t.Parallel()
	one := writeFile(t, "one.yaml", "dataset:\n  path: d.jsonl\nendpoint:\n  price: {input: 2.5, output: 10, cached_input: 1.25}\n")
	c, err := Load(cmdFlags(t), one)
	if err != nil {
		t.Fatal(err)
	}
	tp, ok := c.Endpoint.Price.For("any-model")
	if !ok || tp.Input != 2.5 || tp.Output != 10 || tp.CachedInput == nil || *tp.CachedInput != 1.25 {
		t.Errorf("one price: %+v %v", tp, ok)
	}

	per := writeFile(t, "per.yaml", "dataset:\n  path: d.jsonl\nendpoint:\n  model: gpt-4o\n  price:\n    gpt-4o:\n      input: 2.5\n      output: 10\n")
	c, err = Load(cmdFlags(t), per)
	if err != nil {
		t.Fatal(err)
	}
	if tp, ok := c.Endpoint.Price.For("gpt-4o"); !ok || tp.Input != 2.5 || tp.CachedInput != nil {
		t.Errorf("per model: %+v %v", tp, ok)
	}
	if _, ok := c.Endpoint.Price.For("other"); ok {
		t.Error("a model without a price has one")
	}

	c, err = Load(cmdFlags(t, "--dataset.path=d.jsonl", `--endpoint.price={"input":1,"output":2}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if tp, ok := c.Endpoint.Price.For("m"); !ok || tp.Output != 2 {
		t.Errorf("flag: %+v %v", tp, ok)
	}
	if c, err = Load(cmdFlags(t, "--dataset.path=d.jsonl"), ""); err != nil || c.Endpoint.Price.Set() {
		t.Errorf("no price: set %v, err %v", c.Endpoint.Price.Set(), err)
	}
}

// TestPriceRefused: a bad price names the key and what is wrong with it.
func TestPriceRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"negative", []string{`--endpoint.price={"input":-1,"output":2}`}, "input -1"},
		{"unknown field", []string{`--endpoint.price={"gpt-4o":{"input":1,"outptu":2}}`}, `unknown field "outptu"`},
		{"field beside models", []string{`--endpoint.price={"input":1,"gpt-4o":{"input":1}}`}, `"input" beside model names`},
		{"not an object", []string{`--endpoint.price=2.5`}, "not a JSON object"},
		{"empty object", []string{`--endpoint.price={}`}, "prices nothing"},
		{"past any finite cost", []string{`--endpoint.price={"input":1,"output":1e308}`}, "output 1e+308: over"},
		{"cached past any finite cost", []string{`--endpoint.price={"m":{"input":1,"output":1,"cached_input":2e6}}`}, "cached_input 2e+06: over"},
		{"model never asked", []string{"--endpoint.model=gpt-4o", `--endpoint.price={"gpt-4o":{"input":1},"gpt4o-mini":{"input":1}}`}, `model "gpt4o-mini" is never asked`},
		{"model asked lacks a price", []string{"--endpoint.model=m", `--endpoint.price={"gpt-4o":{"input":1}}`}, `model "gpt-4o" is never asked`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(cmdFlags(t, append([]string{"--dataset.path=d.jsonl"}, tt.args...)...), "")
			if err == nil || !strings.Contains(err.Error(), "endpoint.price") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want endpoint.price and %q", err, tt.want)
			}
		})
	}
}
