package audit

import (
	"maps"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// TestToolCounts: inspect counts a whole conversation's calls over its
// turns, the invalid ones, and the divergences by kind, in JSONL and
// Parquet alike.
func TestToolCounts(t *testing.T) {
	t.Parallel()
	call := func(args string) chat.ToolCall {
		return chat.ToolCall{ID: "c", Type: "function", Function: chat.ToolFunction{Name: "f", Arguments: args}}
	}
	for _, format := range []string{"jsonl", "parquet"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, testOptions(dir, format))
			recs := []*sink.Record{testRecord(0), testRecord(1), testRecord(2), testRecord(3)}
			// A first-turn answer with two calls, one not JSON.
			recs[0].Turns = nil
			recs[0].ToolCalls, recs[0].ToolCallsInvalid = []chat.ToolCall{call("{}"), call("{")}, 1
			// A whole conversation: a call, then the answer.
			recs[1].Turns = []sink.Turn{{ToolCalls: []chat.ToolCall{call("{")}, ToolCallsInvalid: 1}, {Content: "done"}}
			recs[1].ToolCallsInvalid = 1
			// One that diverged at its second call.
			recs[2].Turns = []sink.Turn{{ToolCalls: []chat.ToolCall{call("{}")}}, {ToolCalls: []chat.ToolCall{call("{}")}}}
			recs[2].ToolCalls = recs[2].Turns[1].ToolCalls
			recs[2].Divergence = &sink.Divergence{Kind: sink.DivergedMoreCalls, Turn: 1, Detail: "f"}
			// One that answered where its row called: no call at all.
			recs[3].Turns = []sink.Turn{{Content: "no"}}
			recs[3].Divergence = &sink.Divergence{Kind: sink.DivergedAnswerForCall, Detail: "f"}
			for _, r := range recs {
				if err := s.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			a := mustAudit(t, dir)
			wantDiv := map[string]int64{sink.DivergedMoreCalls: 1, sink.DivergedAnswerForCall: 1}
			if a.ToolCallRecords != 3 || a.ToolCalls != 5 || a.InvalidToolCalls != 2 || !maps.Equal(a.Divergences, wantDiv) {
				t.Errorf("counts %+v, want 3 records, 5 calls, 2 invalid, divergences %v", a.ToolCounts, wantDiv)
			}
		})
	}
}
