package codec

import (
	"reflect"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/internal/jsonlex"
)

// TestScannerKeysFromDeclarations: the scanner knows the keys the reference
// structs declare, and a declared key that the scanner does not read itself
// sends the chunk to the reference, so that a field added to a reference
// struct is decoded from every chunk that carries it.
func TestScannerKeysFromDeclarations(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"top", topKeys, []string{"model", "choices", "usage", "prompt_token_ids", "object", "error", "message"}},
		{"chunk choice", choiceKeys, []string{"index", "delta", "finish_reason", "token_ids", "logprobs"}},
		{"plain choice", messageChoiceKeys, []string{"index", "message", "finish_reason", "token_ids", "logprobs"}},
		{"text", deltaKeys, []string{"content", "reasoning", "reasoning_content", "token_ids", "tool_calls"}},
		{"logprobs", logprobsKeys, []string{"content"}},
		{"logprobs entry", logprobKeys, []string{"logprob", "top_logprobs"}},
		{"alternative", alternativeKeys, []string{"token", "logprob"}},
		{"usage", usageKeys, []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details"}},
		{"prompt tokens details", detailsKeys, []string{"cached_tokens"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s keys %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	type withTools struct {
		textJSON
		Refusal  []int32 `json:"refusal"`
		Skipped  int     `json:"-"`
		Untagged string
	}
	keys := jsonKeys(reflect.TypeFor[withTools]())
	if want := []string{"content", "reasoning", "reasoning_content", "token_ids", "tool_calls", "refusal", "Untagged"}; !slices.Equal(keys, want) {
		t.Fatalf("keys of a struct with a new field: %q, want %q", keys, want)
	}
	// A chunk whose delta carries the new key is the reference's.
	s := chunkScanner{Cursor: jsonlex.Cursor{B: []byte(`[1,2]`)}}
	if s.unknown(strKey{b: []byte("refusal")}, keys) {
		t.Error("the scanner skipped a declared key it does not read; the reference must decode it")
	}
	if s.unknown(strKey{b: []byte("Refusal")}, keys) {
		t.Error("the scanner skipped a key that case-folds to a declared one")
	}
	if !s.unknown(strKey{b: []byte("logprobs")}, keys) {
		t.Error("an undeclared key must be skipped, as encoding/json ignores it")
	}
}
