package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// speculatorsDir writes an output directory of whole conversations with
// ids: ids "a" and "b", two samples each, two turns a record, and turn 0
// of ("b", 1) cut at max_tokens.
func speculatorsDir(t *testing.T, format string) string {
	t.Helper()
	var recs []*sink.Record
	for _, id := range []string{"b", "a"} {
		for sample := range 2 {
			t0 := sink.Turn{Content: "one " + id, Reasoning: "r", FinishReason: "stop", PromptTokens: 3, CompletionTokens: 2,
				PromptTokenIDs: []int32{1, 2, 3}, TokenIDs: []int32{10, int32(sample)}}
			if id == "b" && sample == 1 {
				t0.FinishReason = "length"
			}
			t1 := sink.Turn{Content: "two " + id, FinishReason: "stop", PromptTokens: 7, CompletionTokens: 1,
				PromptTokenIDs: []int32{1, 2, 3, 10, int32(sample), 4, 5}, TokenIDs: []int32{20}}
			r := &sink.Record{ID: id, Sample: sample, Model: "qwen3-8b", Attempts: 2,
				Messages: []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "q1"},
					{Role: "assistant", Content: t0.Content}, {Role: "user", Content: "q2"}},
				Content: t1.Content, FinishReason: t1.FinishReason, PromptTokens: 10, CompletionTokens: 3,
				PromptTokenIDs: t1.PromptTokenIDs, TokenIDs: t1.TokenIDs, Turns: []sink.Turn{t0, t1}}
			recs = append(recs, r)
		}
	}
	return writeDir(t, format, 2, recs...)
}

func readSpeculators(t *testing.T, path string) []speculatorsRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []speculatorsRow
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r speculatorsRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestSpeculatorsTurns: with several samples the row id names the sample;
// the cut turn loses its row only, counted by the truncated filter, and
// --keep-truncated keeps it; the rows are in key order; every turn's
// conversation ends at its own answer, reasoning restored; Parquet shards
// export the same rows; an HF export plans its files by rows.
func TestSpeculatorsTurns(t *testing.T) {
	for _, shards := range []string{sink.FormatJSONL, sink.FormatParquet} {
		dir := speculatorsDir(t, shards)
		out := filepath.Join(t.TempDir(), "train.jsonl")
		sum := run(t, options(t, FormatSpeculators, out, dir))
		rows := readSpeculators(t, out)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		want := []string{"a_s0_gen0", "a_s0_gen1", "a_s1_gen0", "a_s1_gen1", "b_s0_gen0", "b_s0_gen1", "b_s1_gen1"}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: rows %v, want %v", shards, ids, want)
		}
		// The turns kept: three first turns of 3 prompt and 2 completion
		// tokens, with reasoning, and four second turns of 7 and 1.
		if sum.PromptTokens != 3*3+4*7 || sum.CompletionTokens != 3*2+4*1 || sum.WithReasoning != 3 || sum.FinishReasons["stop"] != 7 {
			t.Errorf("%s: tokens %d/%d, reasoning %d, finish %v; want the kept turns'", shards, sum.PromptTokens, sum.CompletionTokens, sum.WithReasoning, sum.FinishReasons)
		}
		if sum.Exported != 7 || sum.Filters[0].Name != FilterTruncated || sum.Filters[0].Dropped != 1 {
			t.Errorf("%s: exported %d, filters %+v; want 7 rows, 1 turn truncated", shards, sum.Exported, sum.Filters)
		}
		r0, r1 := rows[2], rows[3] // a, sample 1
		if !slices.Equal(r0.InputIDs, []int32{1, 2, 3, 10, 1}) || !slices.Equal(r0.LossMask, []int32{0, 0, 0, 1, 1}) ||
			!slices.Equal(r1.InputIDs, []int32{1, 2, 3, 10, 1, 4, 5, 20}) || !slices.Equal(r1.LossMask, []int32{0, 0, 0, 0, 0, 0, 0, 1}) {
			t.Errorf("%s: rows %+v %+v", shards, r0, r1)
		}
		if len(r0.Conversations) != 3 || r0.Conversations[2].Content != "one a" || r0.Conversations[2].ReasoningContent != "r" ||
			len(r1.Conversations) != 5 || r1.Conversations[2].ReasoningContent != "r" || r1.Conversations[4].Content != "two a" {
			t.Errorf("%s: conversations %+v / %+v", shards, r0.Conversations, r1.Conversations)
		}
		if r0.PrimaryID != "a" || r0.Metadata.Sample != 1 || r0.Metadata.Usage.TotalTokens != 5 || r0.Metadata.SamplingParams.Temperature != 0.6 {
			t.Errorf("%s: %+v", shards, r0)
		}

		keep := filepath.Join(t.TempDir(), "keep.jsonl")
		o := options(t, FormatSpeculators, keep, dir)
		o.KeepTruncated = true
		if sum := run(t, o); sum.Exported != 8 || sum.Filters[0].Dropped != 0 {
			t.Errorf("%s: --keep-truncated: exported %d, filters %+v", shards, sum.Exported, sum.Filters)
		}
		if rows := readSpeculators(t, keep); len(rows) != 8 || rows[6].ID != "b_s1_gen0" || rows[6].Metadata.FinishReason != "length" {
			t.Errorf("%s: --keep-truncated rows %+v", shards, rows)
		}

		hf := filepath.Join(t.TempDir(), "hf")
		o = options(t, FormatSpeculators, hf, dir)
		o.HF, o.RowsPerFile = true, 3
		if sum := run(t, o); len(sum.Files) != 4 { // 7 rows in files of 3, and the card
			t.Errorf("%s: HF files %v", shards, sum.Files)
		}
		var got []speculatorsRow
		for _, f := range []string{"train-00000-of-00003.parquet", "train-00001-of-00003.parquet", "train-00002-of-00003.parquet"} {
			got = append(got, readParquet[speculatorsRow](t, filepath.Join(hf, "data", f))...)
		}
		if len(got) != 7 || got[6].ID != "b_s1_gen1" || !slices.Equal(got[6].InputIDs, []int32{1, 2, 3, 10, 1, 4, 5, 20}) {
			t.Errorf("%s: HF rows %+v", shards, got)
		}
	}
}

// TestSpeculatorsRefusesWithoutIDs: records without ids are refused with
// the option that records them, and nothing is written.
func TestSpeculatorsRefusesWithoutIDs(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	out := filepath.Join(t.TempDir(), "train.jsonl")
	_, err := Run(t.Context(), options(t, FormatSpeculators, out, dir))
	if err == nil || !strings.Contains(err.Error(), "generation.return_token_ids: true") {
		t.Fatalf("err %v, want the refusal naming generation.return_token_ids", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want nothing written", out, err)
	}
}

// TestSpeculatorsSingleTurn: a record of one answer (no turns) is one row
// from its top-level ids, its conversation the messages and the answer.
func TestSpeculatorsSingleTurn(t *testing.T) {
	r := &sink.Record{ID: "7", Sample: 1, Model: "qwen3-8b", Attempts: 1,
		Messages: []chat.Message{{Role: "user", Content: "q"}}, Content: "a", Reasoning: "think", FinishReason: "stop",
		PromptTokens: 2, CompletionTokens: 3, PromptTokenIDs: []int32{5, 6}, TokenIDs: []int32{7, 8, 9}}
	dir := writeDir(t, sink.FormatJSONL, 2, r)
	out := filepath.Join(t.TempDir(), "train.jsonl")
	o := options(t, FormatSpeculators, out, dir)
	o.Reasoning = ReasoningInline
	run(t, o)
	rows := readSpeculators(t, out)
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	got := rows[0]
	if got.ID != "7_s1_gen0" || got.PrimaryID != "7" || !slices.Equal(got.InputIDs, []int32{5, 6, 7, 8, 9}) ||
		!slices.Equal(got.LossMask, []int32{0, 0, 1, 1, 1}) || len(got.Conversations) != 2 ||
		got.Conversations[1].Content != "<think>\nthink\n</think>\n\na" || got.Metadata.Usage.TotalTokens != 5 {
		t.Errorf("row %+v", got)
	}
}

// TestSpeculatorsRefusalSaysTheServerIgnoredIDs: a job that asked for ids
// (generation.return_token_ids: true) whose records carry none was
// answered by a server that ignored the option: the refusal says so, and
// does not tell the user to turn on what was on.
func TestSpeculatorsRefusalSaysTheServerIgnoredIDs(t *testing.T) {
	t.Parallel()
	dir := fixtureDir(t, sink.FormatJSONL)
	o := options(t, FormatSpeculators, filepath.Join(t.TempDir(), "train.jsonl"), dir)
	o.Job.Sampling.ReturnTokenIDs = true
	_, err := Run(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "the server ignored return_token_ids") || strings.Contains(err.Error(), "run the job with generation.return_token_ids: true") {
		t.Fatalf("err %v, want the refusal saying the server ignored return_token_ids", err)
	}
}
