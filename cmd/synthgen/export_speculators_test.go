package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/sink"
)

// specRow is a speculators row as its training reads it.
type specRow struct {
	ID            string  `json:"id" parquet:"id"`
	PrimaryID     string  `json:"primary_id" parquet:"primary_id"`
	InputIDs      []int32 `json:"input_ids" parquet:"input_ids,list"`
	LossMask      []int32 `json:"loss_mask" parquet:"loss_mask,list"`
	Conversations []struct {
		Role    string `json:"role" parquet:"role"`
		Content string `json:"content" parquet:"content"`
	} `json:"conversations" parquet:"conversations,list"`
	Metadata struct {
		FinishReason string `json:"finish_reason" parquet:"finish_reason"`
		IsToolCall   bool   `json:"is_tool_call" parquet:"is_tool_call"`
		Usage        struct {
			PromptTokens     int `json:"prompt_tokens" parquet:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens" parquet:"completion_tokens"`
		} `json:"usage" parquet:"usage"`
		SamplingParams struct {
			Temperature float64 `json:"temperature" parquet:"temperature"`
			MaxTokens   int     `json:"max_tokens" parquet:"max_tokens"`
		} `json:"sampling_params" parquet:"sampling_params"`
	} `json:"metadata" parquet:"metadata"`
}

// speculatorsLoad reads a speculators JSONL file as speculators' training
// takes its rows (src/speculators/train/data.py and
// scripts/response_regeneration/script.py): every line a JSON object;
// input_ids a non-empty list of integers (token ids, torch.long);
// loss_mask a list of 0 and 1 one per input id (its seq_len is
// len(input_ids)), some 1 so the row trains; id unique, primary_id set.
// A number that is not an integer, or a mask value other than 0 and 1, is
// an error, as torch would refuse or mistrain on it.
func speculatorsLoad(t *testing.T, path string) []specRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []specRow
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		for _, k := range []string{"id", "primary_id", "input_ids", "loss_mask", "conversations", "metadata"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("%s:%d: no %q", path, line, k)
			}
		}
		ints := func(k string) []int64 {
			var vs []json.Number
			d := json.NewDecoder(bytes.NewReader(raw[k]))
			d.UseNumber()
			if err := d.Decode(&vs); err != nil {
				t.Fatalf("%s:%d: %s: %v", path, line, k, err)
			}
			out := make([]int64, len(vs))
			for i, v := range vs {
				n, err := v.Int64()
				if err != nil {
					t.Fatalf("%s:%d: %s[%d] = %s, not an integer", path, line, k, i, v)
				}
				out[i] = n
			}
			return out
		}
		ids, mask := ints("input_ids"), ints("loss_mask")
		if len(ids) == 0 || len(mask) != len(ids) {
			t.Fatalf("%s:%d: %d input_ids, %d loss_mask", path, line, len(ids), len(mask))
		}
		trains := false
		for i, m := range mask {
			if m != 0 && m != 1 {
				t.Fatalf("%s:%d: loss_mask[%d] = %d", path, line, i, m)
			}
			trains = trains || m == 1
		}
		if !trains {
			t.Fatalf("%s:%d: loss_mask has no 1: the row trains nothing", path, line)
		}
		var r specRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		if r.ID == "" || r.PrimaryID == "" || seen[r.ID] {
			t.Fatalf("%s:%d: id %q (seen before: %v), primary_id %q", path, line, r.ID, seen[r.ID], r.PrimaryID)
		}
		seen[r.ID] = true
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// checkSpeculatorsRows asserts the rows are the records' turns, one a
// turn: input_ids the turn's prompt ids then its answer ids, exactly, the
// mask 0 then 1 at that boundary, the conversation the turn's messages and
// answer.
func checkSpeculatorsRows(t *testing.T, what string, rows []specRow, recs map[string]sink.Record, turns int) {
	t.Helper()
	if len(rows) != len(recs)*turns {
		t.Fatalf("%s: %d rows for %d records of %d turns", what, len(rows), len(recs), turns)
	}
	for _, row := range rows {
		rec, ok := recs[row.PrimaryID]
		if !ok {
			t.Fatalf("%s: row %s: primary_id %q is no record", what, row.ID, row.PrimaryID)
		}
		var k int
		if _, err := fmt.Sscanf(strings.TrimPrefix(row.ID, rec.ID+"_gen"), "%d", &k); err != nil || row.ID != fmt.Sprintf("%s_gen%d", rec.ID, k) || k >= turns {
			t.Fatalf("%s: row id %q, want %s_gen<k>, k < %d", what, row.ID, rec.ID, turns)
		}
		tn := rec.Turns[k]
		if want := append(slices.Clone(tn.PromptTokenIDs), tn.TokenIDs...); !slices.Equal(row.InputIDs, want) {
			t.Errorf("%s: %s: input_ids %v, want turn %d's prompt ids then answer ids %v", what, row.ID, row.InputIDs, k, want)
		}
		p := len(tn.PromptTokenIDs)
		if len(row.LossMask) != len(row.InputIDs) || slices.Contains(row.LossMask[:p], 1) || slices.Contains(row.LossMask[p:], 0) {
			t.Errorf("%s: %s: loss_mask not 0 over the %d prompt ids and 1 over the %d answer ids: %v", what, row.ID, p, len(tn.TokenIDs), row.LossMask)
		}
		conv := row.Conversations
		if len(conv) != 2*k+2 || conv[len(conv)-1].Role != "assistant" || conv[len(conv)-1].Content != tn.Content {
			t.Errorf("%s: %s: conversations %+v, want turn %d's messages and its answer %q", what, row.ID, conv, k, tn.Content)
		} else {
			for i, m := range rec.Messages[:2*k+1] {
				if conv[i].Role != m.Role || conv[i].Content != m.Content {
					t.Errorf("%s: %s: conversations[%d] %+v, sent %+v", what, row.ID, i, conv[i], m)
				}
			}
		}
		md := row.Metadata
		if md.FinishReason != tn.FinishReason || md.Usage.PromptTokens != tn.PromptTokens || md.Usage.CompletionTokens != tn.CompletionTokens || md.SamplingParams.MaxTokens != 100000 {
			t.Errorf("%s: %s: metadata %+v, turn %+v", what, row.ID, md, tn)
		}
	}
}

// TestExportSpeculators: a 3-turn turns: all run with ids exports one row
// per turn, input_ids that turn's prompt ids and answer ids exactly, the
// loss mask switching at that boundary, which speculators' loader reads;
// Parquet holds the same rows.
func TestExportSpeculators(t *testing.T) {
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: writeTurns(t, 6, 3), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args("--generation.return_token_ids", "--generation.turns", "all", "--generation.max_tokens", "100000")...).ok(t, "run")
	recs := dirRecords(t, cj.dir)
	if len(recs) != 6 {
		t.Fatalf("%d records", len(recs))
	}
	out := filepath.Join(t.TempDir(), "train.jsonl")
	r := cliRun(t, "export", cj.dir, "--format", "speculators", "--out", out)
	r.ok(t, "export")
	rows := speculatorsLoad(t, out)
	checkSpeculatorsRows(t, "jsonl", rows, recs, 3)

	pq := filepath.Join(t.TempDir(), "train.parquet")
	cliRun(t, "export", cj.dir, "--format", "speculators", "--out", pq).ok(t, "export parquet")
	prows, err := parquet.ReadFile[specRow](pq)
	if err != nil {
		t.Fatal(err)
	}
	checkSpeculatorsRows(t, "parquet", prows, recs, 3)
	for i := range prows {
		if i < len(rows) && (prows[i].ID != rows[i].ID || !slices.Equal(prows[i].InputIDs, rows[i].InputIDs)) {
			t.Errorf("parquet row %d %s differs from the JSONL's %s", i, prows[i].ID, rows[i].ID)
		}
	}
}

// TestExportSpeculatorsRefusesWithoutIDs: a run that did not ask for ids
// is refused, naming the option to set, and nothing is written.
func TestExportSpeculatorsRefusesWithoutIDs(t *testing.T) {
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: writeTurns(t, 3, 2), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args("--generation.turns", "all")...).ok(t, "run")
	out := filepath.Join(t.TempDir(), "train.jsonl")
	r := cliRun(t, "export", cj.dir, "--format", "speculators", "--out", out)
	if r.err == nil || !strings.Contains(r.err.Error(), "generation.return_token_ids: true") {
		t.Fatalf("export without ids: err %v, want a refusal naming generation.return_token_ids: true\nstderr:\n%s", r.err, r.stderr)
	}
	if code := exitCode(r.err); code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want nothing written", out, err)
	}
}
