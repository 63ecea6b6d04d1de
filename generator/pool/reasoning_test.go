package pool

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/sink"
)

// TestReasoningCheck: the check decides once, on the first answers (or on
// all of them when fewer come), and only when (nearly) all lack reasoning:
// with think tags in content (the reasoning is there, unparsed) or without
// (no reasoning at all, said too: a training file without reasoning must
// be no surprise).
func TestReasoningCheck(t *testing.T) {
	raw := &sink.Record{Content: "<think>\nhmm\n</think>\n\n4"}
	closeOnly := &sink.Record{Content: "hmm, two and two\n</think>\n\n4"} // the template opened the tag
	parsed := &sink.Record{Reasoning: "hmm", Content: "4"}
	plain := &sink.Record{Content: "4"} // a model that does not reason
	tests := []struct {
		name  string
		want  int
		recs  []*sink.Record
		found bool
	}{
		{"no parser", 3, []*sink.Record{raw, closeOnly, raw}, true},
		{"parser", 3, []*sink.Record{parsed, parsed, parsed}, false},
		{"no reasoning at all", 3, []*sink.Record{plain, plain, plain}, true},
		{"some reasoning", 3, []*sink.Record{plain, parsed, plain}, false},
		{"one in ten with reasoning is nearly all", 10, []*sink.Record{parsed, raw, raw, raw, raw, raw, raw, raw, raw, raw}, true},
		{"two in ten with reasoning is not", 10, []*sink.Record{parsed, parsed, raw, raw, raw, raw, raw, raw, raw, raw}, false},
		{"fewer answers than wanted: decided at the end", 20, []*sink.Record{raw, raw}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &reasoningCheck{want: tt.want}
			var got []*NoReasoningError
			for _, r := range tt.recs {
				if e := c.observe(r); e != nil {
					got = append(got, e)
				}
			}
			if e := c.end(); e != nil {
				got = append(got, e)
			}
			for range 5 { // decided: later answers change nothing
				if e := c.observe(raw); e != nil {
					got = append(got, e)
				}
			}
			if (len(got) == 1) != tt.found || len(got) > 1 {
				t.Errorf("found %d times %v, want found=%v once", len(got), got, tt.found)
			}
			if len(got) == 1 && got[0].InContent() != (tt.recs[0] != plain) {
				t.Errorf("%v: InContent %v", got[0], got[0].InContent())
			}
		})
	}
}

// TestReasoningParserHintPerKind: each server's own switch, spelled as it
// spells its parsers; a server of unknown kind gets all three. The check
// tells the error the kind of the run's server.
func TestReasoningParserHintPerKind(t *testing.T) {
	tests := []struct {
		kind        promscrape.Kind
		want, other []string
	}{
		{promscrape.KindVLLM, []string{"vLLM", "--reasoning-parser", "deepseek_r1"}, []string{"SGLang", "llama", "deepseek-r1"}},
		{promscrape.KindSGLang, []string{"SGLang", "--reasoning-parser", "deepseek-r1"}, []string{"vLLM", "llama", "deepseek_r1"}},
		{promscrape.KindLlamaCpp, []string{"llama-server", "--reasoning-format deepseek"}, []string{"vLLM", "SGLang", "--reasoning-parser"}},
		{promscrape.KindUnknown, []string{"vLLM and SGLang --reasoning-parser", "llama-server --reasoning-format deepseek"}, nil},
		{"", []string{"vLLM and SGLang --reasoning-parser", "llama-server --reasoning-format deepseek"}, nil},
	}
	for _, tc := range tests {
		hint := ReasoningParserHint(tc.kind)
		for _, w := range tc.want {
			if !strings.Contains(hint, w) {
				t.Errorf("%q: hint %q lacks %q", tc.kind, hint, w)
			}
		}
		for _, n := range tc.other {
			if strings.Contains(hint, n) {
				t.Errorf("%q: hint %q names %q, another server's", tc.kind, hint, n)
			}
		}
	}
	c := &reasoningCheck{want: 1, server: promscrape.KindLlamaCpp}
	e := c.observe(&sink.Record{Content: "<think>\nhmm\n</think>\n\n4"})
	if e == nil || e.Server != promscrape.KindLlamaCpp || e.Hint() != ReasoningParserHint(promscrape.KindLlamaCpp) {
		t.Fatalf("error %+v, want one of a llama.cpp server with its hint", e)
	}
}
