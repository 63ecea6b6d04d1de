package export

import (
	"fmt"
	"strconv"

	"github.com/synthgen/synthgen/generator/job"
	"github.com/synthgen/synthgen/sink"
)

// The speculators format is the pre-tokenized row of vllm-project/
// speculators' scripts/response_regeneration/script.py
// (_sample_from_response and build_boundary_sample): one row per assistant
// turn, {"id", "primary_id", "input_ids", "loss_mask", "conversations",
// "metadata"}, where input_ids is the turn's prompt_token_ids followed by
// the choice's token_ids and loss_mask is 0 over the prompt and 1 over the
// answer, as long as input_ids. Training reads input_ids and loss_mask
// (src/speculators/train/data.py: the rows' "input_ids" and "loss_mask",
// one entry per position); conversations is a readable twin that training
// ignores, and primary_id is the conversation's key the script resumes
// on. The script names its rows <primary_id>_gen<N>; here a row is
// <id>_turn<k>, k counting the record's assistant turns from 0, and
// <id>_s<sample>_turn<k> when the job asked several samples (generation.n
// > 1), so every row's id is unique. The ids are int32, as the record
// holds them; JSON writes them as numbers and Parquet as lists of int32.

// speculatorsRow is one assistant turn, tokenized.
type speculatorsRow struct {
	ID            string          `json:"id" parquet:"id"`
	PrimaryID     string          `json:"primary_id" parquet:"primary_id"`
	InputIDs      []int32         `json:"input_ids" parquet:"input_ids,list"`
	LossMask      []int32         `json:"loss_mask" parquet:"loss_mask,list"`
	Conversations []roleTurn      `json:"conversations" parquet:"conversations,list"`
	Metadata      speculatorsMeta `json:"metadata" parquet:"metadata"`
}

// speculatorsMeta is the script's metadata: the turn's finish_reason, its
// usage, and the sampling values the job sent (the script's
// sampling_params). sample is the record's sample number.
type speculatorsMeta struct {
	Sample         int                 `json:"sample" parquet:"sample"`
	FinishReason   string              `json:"finish_reason" parquet:"finish_reason"`
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

// tokenTurn is one answered turn with its ids.
type tokenTurn struct {
	finish             string
	prompt, completion int
	promptIDs, ids     []int32
}

// tokenTurns are a record's answered turns with their ids: every turn of a
// whole conversation, else the record's one answer.
func tokenTurns(rec *sink.Record) []tokenTurn {
	if len(rec.Turns) == 0 {
		return []tokenTurn{{rec.FinishReason, rec.PromptTokens, rec.CompletionTokens, rec.PromptTokenIDs, rec.TokenIDs}}
	}
	out := make([]tokenTurn, len(rec.Turns))
	for i, t := range rec.Turns {
		out[i] = tokenTurn{t.FinishReason, t.PromptTokens, t.CompletionTokens, t.PromptTokenIDs, t.TokenIDs}
	}
	return out
}

// speculatorsMissing says what a record lacks for the format, or "".
// asked is the job's generation.return_token_ids: when it was on, the
// server ignored it (the run warned of it), and turning it on is no fix.
func speculatorsMissing(rec *sink.Record, asked bool) string {
	for k, t := range tokenTurns(rec) {
		if len(t.promptIDs) > 0 && len(t.ids) > 0 {
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

// speculatorsKept counts the turns of rec that become rows and those a
// cut at max_tokens drops.
func speculatorsKept(rec *sink.Record, keepTruncated bool) (kept, truncated int) {
	for _, t := range tokenTurns(rec) {
		if t.finish == "length" && !keepTruncated {
			truncated++
			continue
		}
		kept++
	}
	return kept, truncated
}

// answersKept are the answers of rec that become speculators rows.
func answersKept(rec *sink.Record, keepTruncated bool) []sink.Turn {
	var out []sink.Turn
	for _, a := range answers(rec) {
		if a.FinishReason != "length" || keepTruncated {
			out = append(out, a)
		}
	}
	return out
}

// speculatorsOf is a record as its rows, one per assistant turn kept.
func speculatorsOf(j job.Job, keepTruncated bool) func(rec *sink.Record, mode string) []speculatorsRow {
	sampling := speculatorsSampling{Temperature: j.Sampling.Temperature, TopP: j.Sampling.TopP, MaxTokens: j.Sampling.MaxTokens}
	several := j.Samples() > 1
	return func(rec *sink.Record, mode string) []speculatorsRow {
		conv := roleTurns(rec, mode)
		turns := tokenTurns(rec)
		// The assistant turns of the conversation that are the model's
		// answers: the last len(turns), the final answer among them.
		var ends []int
		for i, t := range conv {
			if t.Role == "assistant" {
				ends = append(ends, i)
			}
		}
		skip := len(ends) - len(turns)
		prefix := rec.ID + "_turn"
		if several {
			prefix = rec.ID + "_s" + strconv.Itoa(rec.Sample) + "_turn"
		}
		rows := make([]speculatorsRow, 0, len(turns))
		for k, t := range turns {
			if t.finish == "length" && !keepTruncated {
				continue
			}
			ids := make([]int32, 0, len(t.promptIDs)+len(t.ids))
			ids = append(append(ids, t.promptIDs...), t.ids...)
			mask := make([]int32, len(ids))
			for i := len(t.promptIDs); i < len(mask); i++ {
				mask[i] = 1
			}
			upTo := len(conv)
			if skip+k >= 0 {
				upTo = ends[skip+k] + 1
			}
			rows = append(rows, speculatorsRow{
				ID:            prefix + strconv.Itoa(k),
				PrimaryID:     rec.ID,
				InputIDs:      ids,
				LossMask:      mask,
				Conversations: conv[:upTo],
				Metadata: speculatorsMeta{
					Sample:         rec.Sample,
					FinishReason:   t.finish,
					Usage:          speculatorsUsage{PromptTokens: t.prompt, CompletionTokens: t.completion, TotalTokens: t.prompt + t.completion},
					SamplingParams: sampling,
				},
			})
		}
		return rows
	}
}
