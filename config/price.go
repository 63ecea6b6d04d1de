package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

const priceKey = "endpoint.price"

// Price is endpoint.price: what a hosted server bills, in USD per million
// tokens, from which a run's cost is reckoned. It changes no answer, so it
// is no part of the job. Either one price for whatever model answers
// ({input: 2.5, output: 10, cached_input: 1.25}) or one per model
// ({gpt-4o: {input: ...}, my-model: {...}}).
type Price struct {
	// Value is the key as written (JSON text; a file's mapping made JSON).
	Value string
	// All is the one price for every model; nil when priced per model.
	All *TokenPrice
	// Models are the prices per model name, when not All.
	Models map[string]TokenPrice
}

// TokenPrice is one model's price, USD per million tokens. CachedInput is
// the price of a prompt token the server had cached; unset, it is Input.
type TokenPrice struct {
	Input       float64  `json:"input"`
	Output      float64  `json:"output"`
	CachedInput *float64 `json:"cached_input,omitempty"`
}

// Set reports whether a price was given.
func (p Price) Set() bool { return p.All != nil || len(p.Models) > 0 }

// For is the price of the model asked, and whether there is one.
func (p Price) For(model string) (TokenPrice, bool) {
	if p.All != nil {
		return *p.All, true
	}
	tp, ok := p.Models[model]
	return tp, ok
}

// String is the key's value as written.
func (p Price) String() string { return p.Value }

// priceFields are a TokenPrice's keys: an object of only these is one price
// for all, any other key a model's name.
var priceFields = []string{"input", "output", "cached_input"}

// ParsePrice reads endpoint.price's value: "" (none) or a JSON object,
// either a TokenPrice or model names each mapped to one.
func ParsePrice(s string) (Price, error) {
	p := Price{Value: s}
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &top); err != nil || top == nil {
		return Price{}, fmt.Errorf("not a JSON object such as {\"input\": 2.5, \"output\": 10, \"cached_input\": 1.25} (USD per million tokens) or one such object per model")
	}
	if len(top) == 0 {
		return Price{}, fmt.Errorf("an empty object prices nothing: give input and output (USD per million tokens)")
	}
	flat := true
	for k := range top {
		flat = flat && slices.Contains(priceFields, k)
	}
	if flat {
		tp, err := parseTokenPrice([]byte(s))
		if err != nil {
			return Price{}, err
		}
		p.All = &tp
		return p, nil
	}
	names := make([]string, 0, len(top))
	for k := range top {
		names = append(names, k)
	}
	sort.Strings(names)
	p.Models = make(map[string]TokenPrice, len(top))
	for _, name := range names {
		if slices.Contains(priceFields, name) {
			return Price{}, fmt.Errorf("%q beside model names: give either one price ({input, output, cached_input}) or one per model", name)
		}
		tp, err := parseTokenPrice(top[name])
		if err != nil {
			return Price{}, fmt.Errorf("model %q: %w", name, err)
		}
		p.Models[name] = tp
	}
	return p, nil
}

// maxPrice bounds a price, USD per million tokens: far above any provider's,
// and low enough that a run's cost stays finite.
const maxPrice = 1e6

func parseTokenPrice(b []byte) (TokenPrice, error) {
	var tp TokenPrice
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tp); err != nil {
		return TokenPrice{}, fmt.Errorf("want {input, output, cached_input} in USD per million tokens: %w", err)
	}
	check := func(name string, v float64) error {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s %v: a price is a number of dollars, 0 or more", name, v)
		}
		if v > maxPrice {
			// A cost must stay a finite number: 1e308 a million tokens
			// is +Inf after the first answer, which no record can hold.
			return fmt.Errorf("%s %v: over %v USD per million tokens (a dollar a token), past any provider's price", name, v, maxPrice)
		}
		return nil
	}
	if err := check("input", tp.Input); err != nil {
		return TokenPrice{}, err
	}
	if err := check("output", tp.Output); err != nil {
		return TokenPrice{}, err
	}
	if tp.CachedInput != nil {
		if err := check("cached_input", *tp.CachedInput); err != nil {
			return TokenPrice{}, err
		}
	}
	return tp, nil
}

// assign reads raw: a JSON object string from a flag or the environment, or
// the file's mapping (made JSON text by the file check).
func (p *Price) assign(raw any) error {
	s, err := toString(raw)
	if err != nil {
		return fmt.Errorf("%v; write a mapping such as {input: 2.5, output: 10, cached_input: 1.25}", err)
	}
	parsed, err := ParsePrice(s)
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// validatePrice refuses a price per model for a model the job never asks
// for (a typo would price nothing), and a table lacking the model asked.
// With endpoint.model empty the model is known only once the server lists
// it; cmd checks it then (Price.For).
func (c Config) validatePrice() *FieldError {
	p, model := c.Endpoint.Price, c.Endpoint.Model
	if len(p.Models) == 0 || model == "" {
		return nil
	}
	for _, name := range sortedKeys(p.Models) {
		if name != model {
			return &FieldError{Key: priceKey, Value: p.Value, Reason: fmt.Sprintf("model %q is never asked: the job asks endpoint.model %q", name, model), related: []string{"endpoint.model"}}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
