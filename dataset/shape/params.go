package shape

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// A row's own request fields (an openai-batch row's body, the
// dataset.params_field column) go to the server as the row gives them,
// replacing the job's. The ones every OpenAI-compatible server reads the
// same way are checked here, so that a row whose temperature is "hot" or
// whose max_tokens is 1e30 is a bad row named before any request, not a
// 400 after one. Others (extra_body's kind: top_k, min_p, ...) pass as
// given, for the server to judge.

// paramRule checks one known field's value.
type paramRule struct {
	integer  bool    // a whole number
	min, max float64 // inclusive bounds
	what     string  // the expected value, for the message
}

// maxTokensLimit bounds max_tokens: no model's context is longer.
const maxTokensLimit = 1 << 24

var paramRules = map[string]paramRule{
	"temperature":           {min: 0, max: 2, what: "a number from 0 to 2"},
	"top_p":                 {min: math.SmallestNonzeroFloat64, max: 1, what: "a number above 0, at most 1"},
	"max_tokens":            {integer: true, min: 1, max: maxTokensLimit, what: fmt.Sprintf("a whole number from 1 to %d", maxTokensLimit)},
	"max_completion_tokens": {integer: true, min: 1, max: maxTokensLimit, what: fmt.Sprintf("a whole number from 1 to %d", maxTokensLimit)},
	"presence_penalty":      {min: -2, max: 2, what: "a number from -2 to 2"},
	"frequency_penalty":     {min: -2, max: 2, what: "a number from -2 to 2"},
	"top_logprobs":          {integer: true, min: 0, max: 20, what: "a whole number from 0 to 20"},
}

// checkParam says what is wrong with a known field's value, or nil (for an
// unknown field too).
func checkParam(key string, v any) error {
	rule, ok := paramRules[key]
	if !ok {
		return nil
	}
	f, ok := paramNumber(v)
	if !ok {
		return fmt.Errorf("%s, want %s", shown(v), rule.what)
	}
	if math.IsNaN(f) || f < rule.min || f > rule.max || rule.integer && f != math.Trunc(f) {
		return fmt.Errorf("%s, want %s", shown(v), rule.what)
	}
	return nil
}

// paramNumber is v as a number, when it is one (JSON numbers, Parquet's
// integer and float columns).
func paramNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}
