package export

import (
	"fmt"
	"strconv"

	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// The speculators format is the pre-tokenized row of vllm-project/
// speculators' scripts/response_regeneration/script.py
// (_sample_from_response and build_boundary_sample): one row per target
// generation, a tool call or an answer, {"id", "primary_id", "input_ids",
// "loss_mask", "conversations", "metadata"}, where input_ids is the
// generation's prompt_token_ids followed by its token_ids and loss_mask is
// 0 over the prompt and 1 over the generated tokens (a call's tokens, for
// a call), as long as input_ids. Training reads input_ids and loss_mask
// (src/speculators/data_generation/preprocessing.py,
// _passthrough_pretokenized); primary_id is the conversation's key the
// script resumes on. The script names its rows <primary_id>_gen<k>, k
// counting the conversation's generations from 0; here too, and
// <id>_s<sample>_gen<k> when the job asked several samples (generation.n
// > 1), so every row's id is unique. The script's review-only "text" is
// tokenizer.decode(input_ids), which needs the target's tokenizer: here
// the review-only twin is "conversations" (the messages before the
// generation and the generation itself, calls included), as the script
// wrote it before it decoded. A conversation that left its row
// (Record.Divergence) ends with the divergent generation, whose row is
// kept: the script commits that row and truncates after it. The ids are
// int32, as the record holds them; JSON writes them as numbers and Parquet
// as lists of int32.

// speculatorsRow is one target generation, tokenized.
type speculatorsRow struct {
	ID            string          `json:"id" parquet:"id"`
	PrimaryID     string          `json:"primary_id" parquet:"primary_id"`
	InputIDs      []int32         `json:"input_ids" parquet:"input_ids,list"`
	LossMask      []int32         `json:"loss_mask" parquet:"loss_mask,list"`
	Conversations []messageTurn   `json:"conversations" parquet:"conversations,list"`
	Metadata      speculatorsMeta `json:"metadata" parquet:"metadata"`
	// turn is the generation's turn as the hidden-state pass names it
	// (hiddenTurn): no column, the key of its file for speculators-hidden.
	turn int
}

// hiddenTurn is the turn number of answer k of rec as the hidden-state
// pass (generator/hidden.UnitsOf) names its file: the index in
// Record.Turns, -1 for a record of one answer.
func hiddenTurn(rec *sink.Record, k int) int {
	if len(rec.Turns) == 0 {
		return -1
	}
	return k
}

// speculatorsMeta is the script's metadata: the generation's
// finish_reason, whether it is a tool call, its usage, and the sampling
// values the job sent (the script's sampling_params). sample is the
// record's sample number.
type speculatorsMeta struct {
	Sample         int                 `json:"sample" parquet:"sample"`
	FinishReason   string              `json:"finish_reason" parquet:"finish_reason"`
	IsToolCall     bool                `json:"is_tool_call" parquet:"is_tool_call"`
	Usage          speculatorsUsage    `json:"usage" parquet:"usage"`
	SamplingParams speculatorsSampling `json:"sampling_params" parquet:"sampling_params"`
}

// speculatorsUsage is the turn's usage, as the server's response has it.
type speculatorsUsage struct {
	PromptTokens     int `json:"prompt_tokens" parquet:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens" parquet:"completion_tokens"`
	TotalTokens      int `json:"total_tokens" parquet:"total_tokens"`
}

type speculatorsSampling struct {
	Temperature float64 `json:"temperature" parquet:"temperature"`
	TopP        float64 `json:"top_p" parquet:"top_p"`
	MaxTokens   int     `json:"max_tokens" parquet:"max_tokens"`
}

// speculatorsMissing says what a record lacks for the format, or "".
// asked is the job's generation.return_token_ids: when it was on, the
// server ignored it (the run warned of it), and turning it on is no fix.
func speculatorsMissing(rec *sink.Record, asked bool) string {
	for k, t := range answers(rec) {
		if len(t.PromptTokenIDs) > 0 && len(t.TokenIDs) > 0 {
			continue
		}
		what := fmt.Sprintf("id %q sample %d turn %d carries no prompt_token_ids or token_ids: --format speculators needs the ids the server tokenized; ", rec.ID, rec.Sample, k)
		if asked {
			return what + "the job asked for them (generation.return_token_ids: true), but the server ignored return_token_ids and answered without them: " +
				"run the job again into a new output.dir against a server that returns them (vLLM 0.10.2 or later), with generation.require_token_ids: true to stop at once if it does not"
		}
		return what + "run the job with generation.return_token_ids: true (--generation.return_token_ids)"
	}
	return ""
}

// speculatorsKept returns the answers of rec that become rows, how many a
// cut at max_tokens drops, and (has not nil: speculators-hidden) the
// turns of those left that has says have no hidden-state file, which are
// dropped too. has takes the pass's turn number (hiddenTurn).
func speculatorsKept(rec *sink.Record, keepTruncated bool, has func(turn int) bool) (kept []sink.Turn, truncated int, noFile []int) {
	for k, a := range answers(rec) {
		switch {
		case a.FinishReason == "length" && !keepTruncated:
			truncated++
		case has != nil && !has(hiddenTurn(rec, k)):
			noFile = append(noFile, k)
		default:
			kept = append(kept, a)
		}
	}
	return kept, truncated, noFile
}

// speculatorsRowID names the row of answer k of rec: <id>_gen<k>, and
// <id>_s<sample>_gen<k> when the job asked several samples.
func speculatorsRowID(rec *sink.Record, several bool, k int) string {
	if several {
		return rec.ID + "_s" + strconv.Itoa(rec.Sample) + "_gen" + strconv.Itoa(k)
	}
	return rec.ID + "_gen" + strconv.Itoa(k)
}

// speculatorsOf is a record as its rows, one per generation kept.
func speculatorsOf(j job.Job, keepTruncated bool) func(rec *sink.Record, mode string) []speculatorsRow {
	sampling := speculatorsSampling{Temperature: j.Sampling.Temperature, TopP: j.Sampling.TopP, MaxTokens: j.Sampling.MaxTokens}
	several := j.Samples() > 1
	return func(rec *sink.Record, mode string) []speculatorsRow {
		conv := messageTurns(rec, mode)
		turns := answers(rec)
		// The assistant turns of the conversation that are the model's
		// generations: the last len(turns), the final one among them.
		var ends []int
		for i, t := range conv {
			if t.Role == "assistant" {
				ends = append(ends, i)
			}
		}
		skip := len(ends) - len(turns)
		rows := make([]speculatorsRow, 0, len(turns))
		for k, t := range turns {
			if t.FinishReason == "length" && !keepTruncated {
				continue
			}
			ids := make([]int32, 0, len(t.PromptTokenIDs)+len(t.TokenIDs))
			ids = append(append(ids, t.PromptTokenIDs...), t.TokenIDs...)
			mask := make([]int32, len(ids))
			for i := len(t.PromptTokenIDs); i < len(mask); i++ {
				mask[i] = 1
			}
			upTo := len(conv)
			if skip+k >= 0 {
				upTo = ends[skip+k] + 1
			}
			rows = append(rows, speculatorsRow{
				turn:          hiddenTurn(rec, k),
				ID:            speculatorsRowID(rec, several, k),
				PrimaryID:     rec.ID,
				InputIDs:      ids,
				LossMask:      mask,
				Conversations: conv[:upTo],
				Metadata: speculatorsMeta{
					Sample:         rec.Sample,
					FinishReason:   t.FinishReason,
					IsToolCall:     len(t.ToolCalls) > 0,
					Usage:          speculatorsUsage{PromptTokens: t.PromptTokens, CompletionTokens: t.CompletionTokens, TotalTokens: t.PromptTokens + t.CompletionTokens},
					SamplingParams: sampling,
				},
			})
		}
		return rows
	}
}
