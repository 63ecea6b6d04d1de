package pool

import (
	"testing"

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
