// Package export turns the records of one or several synthgen output
// directories into one training file: SpecForge's conversations, ShareGPT,
// OpenAI chat messages, an OpenAI batch output or speculators' pre-tokenized
// rows (one per turn, speculators.go), as JSONL, Parquet or a
// Hugging Face dataset directory, every record ordered by (id, sample),
// with filters that drop what should not train a model and count it.
//
// The directories are checked by the caller (inspect's audit, package
// sink/verdict); Run reads the files that audit counted, and refuses an
// output that would destroy data (safe.go).
package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// Options says what to export and how.
type Options struct {
	Format    string // one of Formats
	Reasoning string // one of ReasoningModes (specforge, sharegpt, messages); "" = field
	// Out is the output: a file (JSONL, or Parquet when it ends in
	// .parquet), "-" for Stdout (JSONL), or with HF a directory to create.
	Out    string
	HF     bool
	Stdout io.Writer
	// Overwrite lets an export replace the file under Out, or with HF the
	// directory when it is one an export wrote (Dataset); never a file of
	// the job's dataset nor one inside an output directory (safe.go).
	Overwrite bool
	// Log takes the notes of an export that are no part of its summary:
	// the leftovers of killed exports it removed or had to leave. Nil:
	// none.
	Log io.Writer
	// RowsPerFile bounds the rows of one HF Parquet file; 0 = 100,000.
	RowsPerFile int

	KeepTruncated bool // keep finish_reason "length"
	KeepThinkTags bool // keep content holding <think> or </think>
	IncludeErrors bool // openai-batch: a line per request that failed for good

	// Report is the audit of the directories (audit.Combine's for several):
	// its Files are what is read, its Has says which error records are open.
	Report *audit.Audit
	// Dirs are the directories, for their error records.
	Dirs []string
	// Job is the directories' job (from the manifest), for the card.
	Job job.Job
	// Version is the synthgen version that made the directories.
	Version string

	// hidden are the directories' kept hidden-state files (speculators-
	// hidden only; run loads them).
	hidden hiddenKept
}

// Filter names, in the order they are applied: a record is counted by the
// first that drops it.
const (
	FilterTruncated = "truncated"  // finish_reason "length"
	FilterEmpty     = "empty"      // no content (whitespace only)
	FilterThinkTags = "think_tags" // <think> or </think> in content
	// FilterSpecForge (specforge only): a conversation SpecForge's
	// validation refuses (specforge.go).
	FilterSpecForge = "specforge"
	// FilterShareGPT (sharegpt only): a conversation LLaMA-Factory's
	// ShareGPT reader skips or cannot render (tools.go).
	FilterShareGPT = "sharegpt"
	// FilterHiddenStates (speculators-hidden only): a turn with no kept
	// hidden-state file, which the trainer could not train on.
	FilterHiddenStates = "hidden_states"
)

// Filter is one filter and what it did.
type Filter struct {
	Name    string `json:"name"`
	Rule    string `json:"rule"`
	Active  bool   `json:"active"`
	Dropped int64  `json:"dropped"`
	Flag    string `json:"flag,omitempty"` // what turns it off
	// perTurn (speculators' truncated filter): the filter drops a turn's
	// row, not the record, and Dropped counts turns.
	perTurn bool
}

// Summary is what an export read, dropped and wrote.
type Summary struct {
	Format   string   `json:"format"`
	Out      string   `json:"out"`
	Files    []string `json:"files"` // written, relative to Out for HF
	Read     int64    `json:"records_read"`
	Exported int64    `json:"exported"`
	Filters  []Filter `json:"filters"`
	// Failed are the keys that failed for good (an error record and no
	// record): never training rows; ErrorLines of them were written as
	// error lines (openai-batch --include-errors).
	Failed     int64 `json:"failed"`
	ErrorLines int64 `json:"error_lines"`

	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	CompletionP50    int              `json:"completion_p50"`
	CompletionP90    int              `json:"completion_p90"`
	FinishReasons    map[string]int64 `json:"finish_reasons"`
	// WithReasoning counts the exported rows whose answer has reasoning
	// (any turn's, for a whole conversation).
	WithReasoning int64 `json:"with_reasoning"`
	// ToolCalls counts the target's calls in the exported records (every
	// generation's), Diverged those records whose conversation left its
	// row and ended there (Record.Divergence).
	ToolCalls int64 `json:"tool_calls"`
	Diverged  int64 `json:"diverged"`

	// HiddenLinked and HiddenCopied count the hidden-state files of a
	// speculators-hidden export hard-linked and copied (across file
	// systems) into hidden_states/; NoHidden names the first rows (at most
	// maxNoHidden) the hidden_states filter dropped.
	HiddenLinked int64    `json:"hidden_linked,omitempty"`
	HiddenCopied int64    `json:"hidden_copied,omitempty"`
	NoHidden     []string `json:"no_hidden_states,omitempty"`
}

// countTools adds an exported record's calls and divergence to s.
func (s *Summary) countTools(rec *sink.Record) {
	for _, a := range answers(rec) {
		s.ToolCalls += int64(len(a.ToolCalls))
	}
	if rec.Divergence != nil {
		s.Diverged++
	}
}

// Mean returns the mean prompt and completion tokens of the exported rows.
func (s *Summary) Mean() (prompt, completion float64) {
	if s.Exported == 0 {
		return 0, 0
	}
	return float64(s.PromptTokens) / float64(s.Exported), float64(s.CompletionTokens) / float64(s.Exported)
}

// Check validates the options that do not need the directories.
func (o *Options) Check() error {
	if !slices.Contains(Formats, o.Format) {
		return fmt.Errorf("--format: %q: want one of %s", o.Format, strings.Join(Formats, ", "))
	}
	if o.Reasoning == "" {
		o.Reasoning = ReasoningField
	}
	if !slices.Contains(ReasoningModes, o.Reasoning) {
		return fmt.Errorf("--reasoning: %q: want one of %s", o.Reasoning, strings.Join(ReasoningModes, ", "))
	}
	if o.Reasoning != ReasoningField && o.Format == FormatOpenAIBatch {
		return fmt.Errorf("--reasoning %s: %s keeps reasoning in reasoning_content only, as the Batch API returns it; --reasoning is for specforge, sharegpt and messages", o.Reasoning, o.Format)
	}
	if o.IncludeErrors && o.Format != FormatOpenAIBatch {
		return fmt.Errorf("--include-errors: only with --format openai-batch (failures are never training rows)")
	}
	if o.Out == "" {
		return errors.New("--out: required (a file, - for stdout, or a directory with --hf)")
	}
	if o.Format == FormatOpenAIBatch && (o.HF || o.parquet()) {
		return errors.New("--format openai-batch: the batch output format is JSONL; give --out a .jsonl file or -")
	}
	if o.HF && o.Out == "-" {
		return errors.New("--hf: --out must be a directory to create, not -")
	}
	if o.Format == FormatSpeculatorsHidden {
		return o.checkSpeculatorsHidden()
	}
	return nil
}

// perTurn says whether the format writes a row per generation (the
// speculators formats) rather than one per record.
func (o *Options) perTurn() bool {
	return o.Format == FormatSpeculators || o.Format == FormatSpeculatorsHidden
}

func (o *Options) parquet() bool { return !o.HF && strings.HasSuffix(o.Out, ".parquet") }

func (o *Options) filters() []Filter {
	fs := []Filter{
		{Name: FilterTruncated, Rule: `finish_reason "length": cut at max_tokens`, Active: !o.KeepTruncated, Flag: "--keep-truncated"},
		{Name: FilterEmpty, Rule: "no content (empty or whitespace only)", Active: true},
		{Name: FilterThinkTags, Rule: "<think> or </think> in content: the server split no reasoning out", Active: !o.KeepThinkTags, Flag: "--keep-think-tags"},
	}
	if o.perTurn() {
		fs[0].Rule = `finish_reason "length": a turn cut at max_tokens (its row is dropped, the conversation's other turns stay)`
		fs[0].perTurn = true
	}
	if o.Format == FormatSpecForge {
		fs = append(fs, Filter{Name: FilterSpecForge, Active: true,
			Rule: "a row SpecForge's validate_regenerated_data.py refuses (with tools, its loader): a blank id or turn, a role it does not take, turns out of order, a call's arguments not a JSON object"})
	}
	if o.Format == FormatShareGPT {
		fs = append(fs, Filter{Name: FilterShareGPT, Active: true,
			Rule: "a row LLaMA-Factory's ShareGPT reader skips or cannot render: turns out of order, a call's arguments not a JSON object, text (or inline, </think> or <tool_call> in the reasoning) beside a call"})
	}
	if o.Format == FormatSpeculatorsHidden { // last: buildIndex counts it there
		fs = append(fs, Filter{Name: FilterHiddenStates, Active: true, perTurn: true,
			Rule: "a turn with no kept hidden-state file (no line in DIR/hidden/kept.jsonl: the pass was not run, has not reached it, or failed for it, see DIR/hidden/failed.jsonl)"})
	}
	return fs
}

// drop returns the index of the filter that drops rec, or -1. mode is
// where the reasoning goes (Options.Reasoning).
func drop(fs []Filter, rec *sink.Record, mode string) int {
	for i, f := range fs {
		if !f.Active {
			continue
		}
		if f.Name == FilterSpecForge || f.Name == FilterShareGPT {
			if f.Name == FilterSpecForge && specforgeRefusal(specforgeOf(rec, mode)) != "" ||
				f.Name == FilterShareGPT && sharegptRefusal(Conversation(rec), mode) != "" {
				return i
			}
			continue
		}
		if f.perTurn {
			continue // buildIndex counts the turns it drops; the rows leave them out
		}
		var hit bool
		// A whole conversation is judged by every answer in it: one cut
		// or empty turn spoils the conversation.
		for _, a := range answers(rec) {
			switch f.Name {
			case FilterTruncated:
				hit = hit || a.FinishReason == "length"
			case FilterEmpty:
				// An answer that calls a tool is not empty: its content
				// is the call.
				hit = hit || strings.TrimSpace(a.Content) == "" && len(a.ToolCalls) == 0
			case FilterThinkTags:
				hit = hit || sink.ThinkTags(a.Content) // the server split no reasoning out
			}
		}
		if hit {
			return i
		}
	}
	return -1
}

// Run exports (see Options) and returns what it did. It refuses an Out it
// would destroy (a *RefusedError, safe.go). Nothing appears under Out
// unless the whole export succeeded, and no temporary is left unless the
// process is killed (temp.go). ctx, or SIGINT or SIGTERM (an error
// wrapping ErrInterrupted), stops it between records and before the output
// takes its name.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.Report == nil {
		return nil, errors.New("export: no report of the directories")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := o.checkOut(); err != nil {
		return nil, err
	}
	ctx, stop := watchSignals(ctx, o.Log)
	defer stop()
	sum, err := o.run(ctx)
	if err == nil {
		return sum, nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrInterrupted) {
		what := "nothing was written under " + o.Out + ", and no temporary is left"
		if o.Out == "-" {
			what = "stdout holds the rows before it, not all of them"
		}
		return nil, fmt.Errorf("%w: %s", cause, what)
	}
	return nil, err
}

// run is Run once its output is known to be safe to write and the
// signals are watched.
func (o Options) run(ctx context.Context) (*Summary, error) {
	if o.Format == FormatSpeculatorsHidden {
		var err error
		if o.hidden, err = readHiddenKept(o.Dirs); err != nil {
			return nil, err
		}
	}
	tmpDir, spill := os.TempDir(), spillPattern("")
	if o.Out != "-" {
		if o.HF || o.Format == FormatSpeculatorsHidden {
			if err := durable.MkdirAll(filepath.Dir(o.Out)); err != nil {
				return nil, err
			}
		}
		c, removed, left, err := claimOut(o.Out)
		if err != nil {
			return nil, err
		}
		defer c.release()
		for _, p := range removed {
			fmt.Fprintf(o.Log, "export: removed %s, left by an export of %s that was killed\n", p, o.Out)
		}
		for _, p := range left {
			fmt.Fprintf(o.Log, "export: %s, an export's temporary, stays: another export may be writing it (%s is locked by another export, or cannot be locked); remove it once none runs\n", p, filepath.Dir(o.Out))
		}
		tmpDir, spill = filepath.Dir(o.Out), spillPattern(o.Out)
	}
	x, sum, err := buildIndex(ctx, o, tmpDir, spill)
	if x != nil {
		defer x.close()
	}
	if err != nil {
		return nil, err
	}
	if err := nothingKept(sum); err != nil {
		return nil, err
	}
	switch o.Format {
	case FormatSpecForge:
		err = write(ctx, o, x, sum, shape[specforgeRow]{record: specforgeOf})
	case FormatShareGPT:
		err = write(ctx, o, x, sum, shape[sharegptRow]{record: sharegptOf})
	case FormatMessages:
		err = write(ctx, o, x, sum, shape[messagesRow]{record: messagesOf})
	case FormatOpenAIBatch:
		err = write(ctx, o, x, sum, shape[batchLine]{record: batchOf, failure: batchErrorOf})
	case FormatSpeculators:
		err = write(ctx, o, x, sum, shape[speculatorsRow]{records: speculatorsOf(o.Job, o.KeepTruncated)})
	case FormatSpeculatorsHidden:
		err = writeSpeculatorsHidden(ctx, o, x, sum)
	}
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// NothingKeptError is an export whose filters took every record it read:
// an empty training file is no success, so nothing is written. Summary
// says what each filter dropped.
type NothingKeptError struct{ Summary *Summary }

func (e *NothingKeptError) Error() string {
	var took []string
	for _, f := range e.Summary.Filters {
		if f.Dropped == 0 {
			continue
		}
		what := fmt.Sprintf("%s took %d (%s)", f.Name, f.Dropped, f.Rule)
		switch {
		case f.Flag != "":
			what += "; " + f.Flag + " keeps them"
		case f.Name == FilterSpecForge || f.Name == FilterShareGPT:
			what += "; no flag keeps them in --format " + e.Summary.Format + ", --format messages writes them as they are"
		default:
			what += "; no flag keeps them"
		}
		took = append(took, what)
	}
	return fmt.Sprintf("nothing to export: the filters took all %d records read: %s", e.Summary.Read, strings.Join(took, "; "))
}

// nothingKept refuses an export of zero rows from records read: every one
// was filtered out (a job of records failed for good only, or of none, is
// refused before, by the audit; openai-batch --include-errors' error lines
// are rows).
func nothingKept(sum *Summary) error {
	if sum.Read == 0 || sum.Exported > 0 || sum.ErrorLines > 0 {
		return nil
	}
	return &NothingKeptError{Summary: sum}
}

// percentile is the nearest-rank p-th percentile of the values a
// histogram counts (value -> how many).
func percentile(hist map[int32]int64, p int) int {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := max((int64(p)*n+99)/100, 1)
	for _, v := range slices.Sorted(maps.Keys(hist)) {
		if rank -= hist[v]; rank <= 0 {
			return int(v)
		}
	}
	return 0
}
