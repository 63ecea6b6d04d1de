package main

// synthgen inspect DIR...: an audit of output directories for a person
// (or, with --json, a script). The audit, the verdict and its text are
// package job/judge's; this file holds the flags and the exit codes.
// Several directories (one per --shard i/n) are also read as one dataset:
// a "combined" section adds them up, and a key in two of them is a
// duplicate. The exit code is 1 when anything is invalid.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/hub"
	"github.com/synthgen/synthgen/dataset/outdir"
	"github.com/synthgen/synthgen/internal/human"
	"github.com/synthgen/synthgen/job/judge"
	"github.com/synthgen/synthgen/sink/layout"
)

type inspectFlags struct {
	json      bool
	dataset   string
	shard     string
	allShards bool
}

func newInspectCmd() *cobra.Command {
	var f inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect DIR...",
		Short: "Check output directories: done, failed and pending keys, duplicates, shard validity, tokens",
		Long: `inspect reads an output directory in full and reports what it holds: records and
distinct keys, duplicates (there must be none), every shard and whether it reads,
done / failed / pending keys against the dataset, finish_reason counts and the
truncated (finish_reason "length") share, token totals, and the run history.

It changes nothing and takes no lock, so it is safe while a run is writing the
directory: shards being appended (.open, .journal) are read up to their last
complete line and shown as open.

Pending keys are counted against the dataset named in the manifest (dataset.path,
format, id field, limit, generation.n). When that path does not resolve from
here, give it with --dataset. A directory made with --shard i/n is compared with
its part of the dataset, which its manifest records (a directory written before
synthgen recorded it: from its report.json, or give it with --shard).

Given several directories (the outputs of --shard 0/n ... n-1/n), inspect reports
each and then all of them as one dataset, where a key present in two directories
is a duplicate.

The last line of each directory is its verdict: "ok" only when nothing is
invalid and every selected key is done; "incomplete: 5,053 of 6,000 keys
pending" (or failed for good) when the directories are sound but the job is
not done; "unknown" when the dataset cannot be counted from here.

Exit status: 0 when nothing is invalid and the job is done (or cannot be
counted), 4 when nothing is invalid but keys are pending or failed, 1 when
something is invalid (a duplicate key, a shard that does not read, a shard the
manifest lists that is gone, a job edited without its hash, ...) or the job has
no keys (every row bad, an empty dataset), 2 when a DIR is not an output
directory.`,
		Example: `  synthgen inspect out/run
  synthgen inspect --dataset /data/prompts.jsonl /data/synth/perfectblend-25k
  synthgen inspect out/shard-0 out/shard-1 out/shard-2 out/shard-3
  synthgen inspect --json out/run | jq '.dirs[0].dataset.pending'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New("inspect: no DIR given"), "see 'synthgen inspect --help'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, dirs []string) error {
			return runInspect(cmd.OutOrStdout(), dirs, f)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.BoolVar(&f.json, "json", false, "print the report as one JSON object (the same figures) instead of text")
	fs.StringVar(&f.dataset, "dataset", "", "dataset file or glob to count pending keys against, instead of the manifest's dataset.path")
	fs.StringVar(&f.shard, "shard", "", `with one DIR: count pending keys against shard "i/n" of the dataset instead of the one its manifest records`)
	fs.BoolVar(&f.allShards, "all-shards", false, fmt.Sprintf("list every shard, also when there are more than %d", judge.ShardTable))
	return cmd
}

func runInspect(w io.Writer, dirs []string, f inspectFlags) error {
	var forced *dataset.Shard
	if f.shard != "" {
		if len(dirs) != 1 {
			return usageError(errors.New("--shard: only with one DIR"), "with several DIRs, each takes its shard from its manifest")
		}
		sh, err := dataset.ParseShard(f.shard)
		if err != nil {
			return usageError(fmt.Errorf("--shard: %w", err), "")
		}
		forced = &sh
	}
	dirs, same := judge.Unique(dirs)
	out, err := inspectDirs(dirs, judge.Options{Shard: forced, DatasetPath: f.dataset})
	if err != nil {
		return err
	}
	defer out.Close()
	out.Notes = append(same, out.Notes...)
	judged := judgeInspect(out)
	// `inspect DIR | head`: the reader took what it wanted and went away;
	// the verdict is still the exit code, and nothing is said about it.
	if err := printInspect(w, out, f); err != nil && !readerGone(err) {
		return err
	}
	if !f.json {
		if err := printHidden(w, dirs); err != nil {
			return err
		}
	}
	return judged
}

// inspectDirs is judge.Inspect with the readers cmd links (the Hub's,
// an output directory's) and a usage error for a DIR that is not one.
func inspectDirs(dirs []string, o judge.Options) (*judge.Report, error) {
	o.Remote, o.Outputs = hub.Remote{}, outdir.Reader{}
	out, err := judge.Inspect(dirs, o)
	if err != nil {
		// The key index spills beside the output (or in TMPDIR): a full
		// disk there is no fault of the DIRs.
		if de := diskError(cmp.Or(o.TempDir, os.TempDir()), err); de != nil {
			return nil, de
		}
		return nil, usageError(err, "give the output.dir of a run (the directory holding "+layout.ManifestName+" and "+layout.DataName+"/)")
	}
	return out, nil
}

// judgeInspect judges out and returns the error inspect exits with (nil:
// exit 0): 1 for a directory that is invalid or a job of no keys, 4 for a
// sound one whose job has a pending or failed key.
func judgeInspect(out *judge.Report) error {
	switch out.Judge() {
	case judge.Invalid:
		return &exitError{code: exitFailure, err: errors.New(out.Verdict),
			hint: "each problem above says what to do; run inspect again afterwards"}
	case judge.Incomplete:
		return &exitError{code: exitPending, err: errors.New(out.Verdict), hint: out.Hint()}
	case judge.Empty:
		return &exitError{code: exitFailure, err: errors.New(out.Verdict), hint: out.Completeness().Hint()}
	}
	return nil
}

// printInspect writes the report as text or JSON.
func printInspect(w io.Writer, out *judge.Report, f inspectFlags) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return nil
	}
	if err := out.WriteText(w, f.allShards); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// pluralNum is human.Count, as the other commands' lines write counts.
func pluralNum(n int64, one, many string) string { return human.Count(n, one, many) }
