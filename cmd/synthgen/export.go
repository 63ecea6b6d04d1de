package main

// synthgen export DIR... --format F --out PATH: the records of output
// directories as one training file. The directories are judged as inspect
// judges them (package job/judge) and refused when invalid; the export,
// and what it may overwrite, is package export's. This file holds the
// flags, the refusal and the summary.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/export"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/job/judge"
	"github.com/synthgen/synthgen/sink/layout"
)

// exportHelp is export's --help.
const exportHelp = `export reads one or several output directories (the --shard i/n directories of a
multi-node run too) and writes every record, ordered by id (decimal ids as
numbers) then sample, as one training file.

The directories are checked first, as inspect checks them: a duplicate key, a
shard that does not read, a shard the manifest lists that is gone, or
directories made by different jobs refuse the export (exit 1) with each
problem and what to do.

Formats (--format):
  specforge     SpecForge's conversation format, one JSON line per record, as
                its regenerate_train_data.py writes it:
                {"id", "conversations": [{"role", "content"}, ...,
                {"role": "assistant", "content", "reasoning_content"}],
                "status": "success"}
                The system turn is written when one was sent. SpecForge's
                thinking templates read reasoning_content; its general ones
                drop it: give those --reasoning inline. With tools: the
                turns' tool_calls and tool_call_id, and "tools" (JSON text).
                A row SpecForge's validate_regenerated_data.py (with tools,
                its loader) would refuse is dropped (the specforge filter).
  sharegpt      {"id", "conversations": [{"from": "system"|"human"|"gpt", "value"}]}
                With tools, LLaMA-Factory's: a call is a "function_call"
                turn (value: JSON {"name", "arguments"}, a list for several),
                a result an "observation" turn, and "tools" (JSON text); a
                row its reader skips is dropped (the sharegpt filter).
  messages      OpenAI chat: {"id", "messages": [{"role", "content"}]}
  openai-batch  the OpenAI Batch API output file: {"id", "custom_id", "response":
                {"status_code", "request_id", "body": <chat.completion>}, "error"}
                custom_id is the record id; with generation.n > 1 the choice
                index is the sample.
  speculators   vllm-project/speculators' pre-tokenized rows, one per target
                generation (a tool call or an answer): {"id": "<id>_gen<k>"
                (<id>_s<sample>_gen<k> with generation.n > 1; k from 0),
                "primary_id", "input_ids" (the generation's prompt_token_ids,
                then its token_ids), "loss_mask" (0 over the prompt, 1 over
                the generated tokens), "conversations" (the messages before
                it and the generation, for reading), "metadata"
                {finish_reason, is_tool_call, usage, sampling_params}}. Needs
                a run with generation.return_token_ids: true; a cut turn's
                row is dropped (truncated counts turns).
  speculators-hidden
                speculators' offline training directory (--out: a new
                directory, its trainer's --data-path): the speculators rows
                as datasets' save_to_disk writes them (data-00000-of-00001.arrow,
                dataset_info.json, state.json: input_ids, loss_mask, seq_len)
                and hidden_states/hs_<row>.safetensors, row i's kept file of
                the hidden-state pass (DIR/hidden/), hard-linked (copied only
                across file systems), its token_ids checked against the row.
                A turn with no kept file is dropped (the hidden_states filter),
                counted and named.

Output (--out):
  a file        JSONL; Parquet when PATH ends in .parquet (not openai-batch)
  -             JSONL on stdout
  --hf          PATH is a new directory laid out as a Hugging Face dataset:
                data/train-00000-of-0000N.parquet and a README.md dataset card
                (model, sampling, counts, tokens, finish reasons, filters)

Filters (what each dropped is printed on stderr and in the card):
  truncated     finish_reason "length" (cut at max_tokens); off with --keep-truncated;
                off by default with openai-batch, whose results file is every
                request's answer (--keep-truncated=false drops them there too)
  empty         no content; always on
  think_tags    <think> or </think> in content (the server ran without a
                reasoning parser); off with --keep-think-tags
  specforge     (specforge only) a blank id or turn, a role other than
                system, user and assistant, a system turn after a user turn,
                or turns that do not alternate from user; with tools, turns
                out of the loader's order or a call's arguments not a JSON object
  sharegpt      (sharegpt only) turns out of LLaMA-Factory's order, a call's
                arguments not a JSON object, or text beside a call
  hidden_states (speculators-hidden only) a turn with no kept hidden-state
                file (DIR/hidden/kept.jsonl); always on
  Requests that failed for good are never training rows (openai-batch can
  write them as error lines with --include-errors).

An existing --out is replaced only with --overwrite, and with --hf only when
it is a dataset an export wrote (a README.md card and data/train-*.parquet,
nothing else); a path inside an output directory, or a file of the dataset
the job reads (by its recorded path, or by size and hash), is refused always,
and so is any --overwrite while the dataset cannot be found. A directory named twice (another
spelling, an overlapping glob) is read once.

The output appears under PATH only when complete: it is written beside it as
.NAME.synthgen-export-DIGITS.tmp, fsynced and renamed. An error, SIGINT or
SIGTERM removes the temporary and leaves PATH as it was (exit 130 for a
signal). kill -9 leaves the temporary; the next export of the same PATH
removes it, and says so, once no export running in that directory can own
it. Records are not held in memory: an index of keys is sorted and each
record read again.

A job that is not done (keys pending, or failed for good) is refused with
exit 4, naming the counts, unless --partial: a training file of part of the
job is then written, and what it lacks is said on stderr.

Exit status: 0 when written, 4 when the job is not done (without --partial),
1 when a directory is invalid, the job has no keys, its filters took every
record (each filter named, and the flag that keeps its records), or the export failed (a
full disk says so), 2 for bad flags, an --out refused, or a DIR that is not an
output directory, 130 when a signal stopped it.`

func newExportCmd() *cobra.Command {
	var (
		o                  export.Options
		partial, overwrite bool
	)
	cmd := &cobra.Command{
		Use:   "export DIR... --format F --out PATH",
		Short: "Write the records of output directories as one training file (SpecForge, ShareGPT, messages, OpenAI batch)",
		Long:  exportHelp,
		Example: `  synthgen export out/run --format specforge --out train.jsonl
  synthgen export out/shard-0 out/shard-1 out/shard-2 out/shard-3 --format sharegpt --out train.parquet
  synthgen export out/run --format messages --reasoning inline --out - | head -1
  synthgen export out/run --format specforge --hf --out datasets/my-regen
  synthgen export out/run --format openai-batch --include-errors --out batch_output.jsonl`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New("export: no DIR given"), "see 'synthgen export --help'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, dirs []string) error {
			o.Stdout = cmd.OutOrStdout()
			if o.Format == export.FormatOpenAIBatch && !cmd.Flags().Changed("keep-truncated") {
				// A batch results file is every request's answer, a cut
				// one with its finish_reason, as the Batch API returns it.
				o.KeepTruncated = true
			}
			return runExport(cmd, dirs, o, partial, overwrite)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.Format, "format", "", "specforge | sharegpt | messages | openai-batch | speculators (required)")
	fs.StringVar(&o.Out, "out", "", "output file (.jsonl, .parquet), - for stdout, or with --hf a new directory (required)")
	fs.BoolVar(&o.HF, "hf", false, "write --out as a Hugging Face dataset directory: data/train-*.parquet and a README.md card")
	fs.StringVar(&o.Reasoning, "reasoning", export.ReasoningField, "specforge, sharegpt and messages: field (reasoning_content on the assistant turn) | inline (<think>...</think> before the content) | drop")
	fs.BoolVar(&o.KeepTruncated, "keep-truncated", false, `keep answers cut at max_tokens (finish_reason "length")`)
	fs.BoolVar(&o.KeepThinkTags, "keep-think-tags", false, "keep answers whose content holds <think> or </think>")
	fs.BoolVar(&o.IncludeErrors, "include-errors", false, "openai-batch: also write a line per request that failed for good (response null, error {code, message})")
	fs.IntVar(&o.RowsPerFile, "rows-per-file", 100_000, "with --hf: rows per Parquet file")
	fs.BoolVar(&overwrite, "overwrite", false, "replace an existing --out file, or with --hf a dataset an export wrote (never one inside an output directory, nor a dataset file)")
	fs.BoolVar(&partial, "partial", false, "export a job that is not done (keys pending or failed for good); without it such a job is refused (exit 4)")
	return cmd
}

func runExport(cmd *cobra.Command, dirs []string, o export.Options, partial, overwrite bool) error {
	if err := o.Check(); err != nil {
		return usageError(err, "see 'synthgen export --help'")
	}
	stderr := cmd.ErrOrStderr()
	dirs, same := judge.Unique(dirs)
	for _, n := range same {
		fmt.Fprintf(stderr, "export: %s\n", n)
	}
	tmp := "" // the audit's key index spills beside the output, as the export's own index does
	if o.Out != "-" {
		tmp = filepath.Dir(o.Out)
	}
	out, err := inspectDirs(dirs, judge.Options{TempDir: tmp})
	if err != nil {
		return err
	}
	defer out.Close()
	c, err := exportVerdict(stderr, out, dirs, partial)
	if err != nil {
		return err
	}
	rep := out.Dataset()
	j, err := job.ManifestJob(rep.Dir, rep.Manifest.Job, rep.Manifest.Legacy)
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	o.Report, o.Dirs, o.Job, o.Version = rep, dirs, j, rep.Manifest.Version
	// The audit's sorted key index has done its work (duplicates, the
	// plan): its disk goes before the export's own index takes as much.
	_ = out.Close()
	o.Overwrite, o.Log = overwrite, stderr
	sum, err := export.Run(cmd.Context(), o)
	var refused *export.RefusedError
	var nothing *export.NothingKeptError
	if de := diskError(cmp.Or(tmp, os.TempDir()), err); de != nil {
		return de // its index spills beside the output too
	}
	switch {
	case errors.As(err, &refused):
		return usageError(err, refused.Hint())
	case errors.As(err, &nothing):
		return &exitError{code: exitFailure, err: fmt.Errorf("export: refused: %w", err), hint: "nothing was written under " + o.Out + "; keep those records as the message says, or export another format"}
	case errors.Is(err, export.ErrInterrupted):
		return &exitError{code: exitInterrupted, err: fmt.Errorf("export: %w", err), hint: "run the same export again"}
	case err != nil:
		return &exitError{code: exitFailure, err: fmt.Errorf("export: %w", err), hint: "nothing was written under " + o.Out}
	}
	sum.WriteText(stderr, len(dirs))
	if c.Known && !c.Done() {
		fmt.Fprintf(stderr, "export: partial (--partial): the job is %s; their rows are not in %s\n", c, o.Out)
	}
	return nil
}

// exportVerdict refuses directories that are invalid, not one job's, or
// (without partial) whose job is not done, and says what it warns of.
func exportVerdict(stderr io.Writer, out *judge.Report, dirs []string, partial bool) (judge.Completeness, error) {
	var live []string
	for _, d := range out.Dirs {
		if d.WrittenBy != "" {
			live = append(live, d.Dir)
			fmt.Fprintf(stderr, "export: warning: %s is being written now by %s: only what it has finalized can be exported\n", d.Dir, d.WrittenBy)
		}
	}
	rep := out.Dataset()
	if rep == nil {
		return judge.Completeness{}, &exitError{code: exitFailure, err: fmt.Errorf("export: not combined: %w", out.NotCombined()),
			hint: "export the directories of one job together; each of another job on its own"}
	}
	c := out.Completeness()
	switch out.Judge() {
	case judge.Invalid:
		out.WriteProblems(stderr)
		return c, &exitError{code: exitFailure, err: errors.New("export: refused: " + out.Verdict),
			hint: "each problem above says what to do; 'synthgen inspect " + strings.Join(dirs, " ") + "' shows the whole report"}
	case judge.Incomplete:
		if partial {
			break
		}
		hint := c.Hint() + "; or pass --partial to export the records there are"
		if len(live) > 0 {
			hint = "a run is writing " + strings.Join(live, ", ") + " now: export when it has ended, or pass --partial to export what it has finalized"
		}
		return c, &exitError{code: exitPending, err: errors.New("export: refused: the job is " + c.String()), hint: hint}
	case judge.Empty:
		return c, &exitError{code: exitFailure, err: errors.New("export: refused: the job has " + c.String()), hint: c.Hint()}
	case judge.Unknown:
		fmt.Fprintf(stderr, "export: %s\n", c)
	}
	if rep.Manifest == nil {
		return c, &exitError{code: exitFailure, err: fmt.Errorf("export: %s has no %s: nothing says which model and settings made the records", dirs[0], layout.ManifestName),
			hint: "run synthgen on the directory once (with --force to adopt its shards) to write the manifest"}
	}
	return c, nil
}
