package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/tokenids"
	"github.com/synthgen/synthgen/sink"
)

// TestExportSpeculatorsToolRun: examples/tools.yaml run against the mock
// with return_token_ids, streamed and plain, records every generation's
// ids without a mismatch, and its speculators export, read as speculators'
// loader reads it (JSONL and Parquet alike), is one row per generation,
// <id>_gen<k>, is_tool_call true exactly for the calls, input_ids the
// generation's prompt ids (the mock's for the messages it was sent) then
// its own, and the loss mask 1 exactly over its own: for a call, the
// tokens that spell the reasoning and then the call as the target wrote
// it (mockserver.ToolCallText), for an answer its reasoning and content.
func TestExportSpeculatorsToolRun(t *testing.T) {
	t.Parallel()
	_, url := cliMock(t, nil)
	for _, stream := range []bool{true, false} {
		what := fmt.Sprintf("stream=%v", stream)
		dir := filepath.Join(t.TempDir(), "out")
		cliRun(t, "run", "--config", "../../examples/tools.yaml", "--dataset.path", "../../examples/data/tools.jsonl",
			"--endpoint.base_url", url, "--output.dir", dir, "--generation.return_token_ids",
			fmt.Sprintf("--generation.stream=%v", stream), "--quiet").ok(t, what+" run")
		recs := dirRecords(t, dir)
		if len(recs) != 60 {
			t.Fatalf("%s: %d records, want the 60 rows", what, len(recs))
		}
		gens, calls := 0, 0
		for id, r := range recs {
			for k, tn := range r.Turns {
				if tn.TokenIDsMismatch != "" || len(tn.TokenIDs) != tn.CompletionTokens || len(tn.PromptTokenIDs) == 0 {
					t.Errorf("%s: %s turn %d: %d ids, completion_tokens %d, mismatch %q", what, id, k, len(tn.TokenIDs), tn.CompletionTokens, tn.TokenIDsMismatch)
				}
				gens++
				calls += min(len(tn.ToolCalls), 1)
			}
		}
		out := filepath.Join(t.TempDir(), "train.jsonl")
		cliRun(t, "export", dir, "--format", "speculators", "--out", out).ok(t, what+" export")
		rows := speculatorsLoad(t, out)
		if len(rows) != gens || calls == 0 || calls == gens {
			t.Fatalf("%s: %d rows for %d generations, %d of them calls: want one a generation, calls and answers both", what, len(rows), gens, calls)
		}
		for _, row := range rows {
			checkToolRow(t, what, row, recs)
		}
		pq := filepath.Join(t.TempDir(), "train.parquet")
		cliRun(t, "export", dir, "--format", "speculators", "--out", pq).ok(t, what+" export parquet")
		prows, err := parquet.ReadFile[specRow](pq)
		if err != nil {
			t.Fatal(err)
		}
		if len(prows) != len(rows) {
			t.Fatalf("%s: %d Parquet rows, %d JSONL rows", what, len(prows), len(rows))
		}
		for i, p := range prows {
			r := rows[i]
			if p.ID != r.ID || p.Metadata.IsToolCall != r.Metadata.IsToolCall || !slices.Equal(p.InputIDs, r.InputIDs) || !slices.Equal(p.LossMask, r.LossMask) {
				t.Errorf("%s: Parquet row %d (%s) differs from the JSONL's (%s)", what, i, p.ID, r.ID)
			}
		}
		t.Logf("%s: %d rows, %d calls", what, len(rows), calls)
	}
}

// checkToolRow asserts row is generation k of its record, k from its id,
// with the ids, mask and is_tool_call of that generation.
func checkToolRow(t *testing.T, what string, row specRow, recs map[string]sink.Record) {
	t.Helper()
	rec, ok := recs[row.PrimaryID]
	var k int
	if _, err := fmt.Sscanf(strings.TrimPrefix(row.ID, row.PrimaryID+"_gen"), "%d", &k); !ok || err != nil ||
		row.ID != fmt.Sprintf("%s_gen%d", rec.ID, k) || k >= len(rec.Turns) {
		t.Fatalf("%s: row id %q, primary_id %q: want <id>_gen<k> of a record's generation", what, row.ID, row.PrimaryID)
	}
	tn := rec.Turns[k]
	if row.Metadata.IsToolCall != (len(tn.ToolCalls) > 0) {
		t.Errorf("%s: %s: is_tool_call %v, the generation's calls %v", what, row.ID, row.Metadata.IsToolCall, tn.ToolCalls)
	}
	conv := row.Conversations
	var sent []string
	for _, m := range conv[:len(conv)-1] {
		sent = append(sent, m.Content)
	}
	p := len(tn.PromptTokenIDs)
	if !slices.Equal(row.InputIDs, append(slices.Clone(tn.PromptTokenIDs), tn.TokenIDs...)) {
		t.Fatalf("%s: %s: input_ids are not generation %d's prompt ids then its ids", what, row.ID, k)
	}
	if !slices.Equal(tn.PromptTokenIDs, tokenids.Prompt(sent...)) {
		t.Errorf("%s: %s: the input's prompt ids are not the mock's for the %d messages before the generation", what, row.ID, len(sent))
	}
	want := make([]int32, len(row.InputIDs))
	for i := p; i < len(want); i++ {
		want[i] = 1
	}
	if !reflect.DeepEqual(row.LossMask, want) {
		t.Errorf("%s: %s: loss_mask %v, want 0 over the %d prompt ids, 1 over the rest", what, row.ID, row.LossMask, p)
		return
	}
	spelt := tn.Reasoning + tn.Content
	for _, c := range tn.ToolCalls {
		spelt += mockserver.ToolCallText(c.Function.Name, c.Function.Arguments)
	}
	if trained, ok := mockSpelling(row.InputIDs[p:]); !ok || trained != spelt {
		t.Errorf("%s: %s: the ids under the mask spell %q (all the mock's: %v), the generation is %q", what, row.ID, trained, ok, spelt)
	}
}
