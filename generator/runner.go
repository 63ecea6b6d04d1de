package generator

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/stamp"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/internal/redact"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// Setup is one run of a job into an output directory: the job, the server,
// the output, and how the run treats what it finds there.
type Setup struct {
	// Job is what is asked. An empty Sampling.Model takes the first model
	// the server lists; Selection.Revision and Content are filled by Open.
	Job job.Job

	BaseURL string // the OpenAI-compatible API, e.g. http://localhost:8000/v1
	// BaseURLs, when set, are several replicas of one model (BaseURL is
	// then ignored): each request goes to the healthy one with the fewest
	// in flight (generator/pool/router.go). None of them is part of the job.
	BaseURLs []string
	APIKey   string        // sent as a bearer token when not empty
	Timeout  time.Duration // one whole request
	// StallTimeout ends a streamed attempt that received no byte for this
	// long after its headers (retried, cause "stall"); 0 = off.
	StallTimeout time.Duration
	TLS          *tls.Config // https: ClientTLS's; nil: Go's defaults

	Concurrency int  // requests in flight; with Auto, the most of them
	Auto        bool // concurrency: auto: start at AutoStart, moved by SetLimit
	Stream      bool // stream answers
	Retry       pool.RetryPolicy
	Rate        pool.RateLimits // each endpoint's where its server states none

	Dir          string        // output directory
	Format       string        // shard format of new shards: jsonl or parquet
	PartSize     int           // records per part (output.shard_size)
	SyncInterval time.Duration // durability bound
	RetryErrors  bool          // ask again the keys that failed for good before
	Force        bool          // resume a directory made by another job (recorded)
	// Rehash reads every byte of the dataset's files to stamp them; else a
	// resume takes the stamps of the files that did not change (path, size,
	// modification time, inode) from the directory's manifest.
	Rehash bool
	// RequireReasoning makes a server without a reasoning parser fatal
	// (generation.require_reasoning): the run drains and Run returns a
	// *NoReasoningError. Else it is a warning on Log and in status.json.
	RequireReasoning bool
	// NPerRequest asks a prompt's samples in one request carrying n
	// (generation.n_per_request; pool.Options.NPerRequest).
	NPerRequest bool
	// LongestFirst starts rows with a length hint longest first
	// (generation.longest_first; pool.Options.LongestFirst).
	LongestFirst bool
	// SchemaRetries is how often an answer not in the job's response
	// format is asked again before it is a failure (cause "schema").
	SchemaRetries int
	// RequireTokenIDs makes a server that ignores return_token_ids fatal
	// (generation.require_token_ids): the run drains and Run returns a
	// *NoTokenIDsError. Else it is a warning on Log and in status.json.
	// Only a job that asks for ids (Sampling.ReturnTokenIDs) is checked.
	RequireTokenIDs bool
	// Shape is Job.Sampling.ResponseFormat compiled, when the caller has
	// checked it so (a large schema is compiled once); nil: the pool
	// compiles it.
	Shape *shape.Validator

	OnBadRow   string                               // dataset.on_bad_row
	OnSkip     func(*dataset.RowError)              // a skipped bad row
	OnIgnored  func(field, location string)         // a row's request field synthgen decides itself (said once a field)
	OnDownload func(file string, done, total int64) // an hf:// download's progress
	// Remote reads hf:// dataset paths (hub.Remote{} of package
	// dataset/hub); nil: such a path is an error.
	Remote dataset.Remote
	// Outputs reads a first pass's output directory named as the dataset
	// (outdir.Reader{} of package dataset/outdir), injected as Remote is;
	// nil: such a path is an error.
	Outputs dataset.Outputs

	// Started is when the run began, for status.json and report.json
	// (started_at, duration_s); zero: when Open is called.
	Started time.Time

	// Price is what the server bills for a model (endpoint.price), asked
	// of the model the job resolved to: each record's cost and the run's;
	// nil: no price. A model it has no price for stops Open before the
	// output directory is touched.
	Price func(model string) (runstats.Price, bool)

	// Batch, when set, is the batch-API mode (generator/batch): requests
	// go as the provider's batches, never streamed; Dir, API, Slots and
	// InFlight are filled by Open.
	Batch *batch.Options

	Version string          // synthgen's, for the manifest
	Config  map[string]any  // the effective config without secrets, for the manifest
	Stats   *runstats.Stats // receives every event; nil: a new one

	// Metrics are the endpoints' /metrics, in base_url order (empty: none
	// known): the run's one view of the server, shared by its readers
	// (ServerSources), the fastest of which looks every MetricsInterval;
	// concurrency: auto steers by them, looking every AutoInterval (0:
	// autoconc.DefaultInterval) and saying its moves on AutoLog (nil: Log).
	Metrics         []autoconc.Endpoint
	MetricsInterval time.Duration
	AutoInterval    time.Duration
	AutoLog         io.Writer
	Log             io.Writer // notes for a person (waiting for the server); nil: discarded
}

// Runner is one run, opened: the job pinned (an hf:// dataset to its
// commit, local files to their content), the model checked against the
// server, the output directory locked and recovered, the dataset open. Run
// asks what is left and ends the run; Drain stops intake.
//
// The Runner also writes the run's machine-readable files
// (runfiles.StatusWriter): status.json when Run starts, at each Heartbeat
// and with the state draining on Drain, then status.json and report.json
// when Run ends.
type Runner struct {
	status *runfiles.StatusWriter // status.json and report.json

	setup Setup
	job   job.Job
	rows  int64 // selected rows
	// maxModelLen is the model's context from /v1/models (vLLM's and
	// SGLang's max_model_len, llama.cpp's meta.n_ctx); 0 when the server
	// does not list it.
	maxModelLen int
	// server is the kind of server, as /v1/models named it (owned_by).
	server  promscrape.Kind
	out     *sink.Sink
	src     *badRowGuard // the dataset, stopping a run whose rows are all bad
	eng     *pool.Engine
	auto    *autoconc.State     // concurrency: auto's limit and why; nil when fixed
	metrics []autoconc.Endpoint // Setup.Metrics, each scrape shared by its readers
	batch   *batch.Batcher      // the batch mode's Completer; nil else
}

// observeLoad tells c what each scrape of its server counted running and
// waiting: a server that shows neither while requests sent to it earlier
// than one it answered still wait has lost them (wire.Client.ObserveLoad).
// And it tells seen of every answer: a server whose gate is closed is
// probed at once (pool.Engine.ServerSeen).
func observeLoad(scrape func(context.Context) (promscrape.Sample, error), c *wire.Client, seen func()) func(context.Context) (promscrape.Sample, error) {
	return func(ctx context.Context) (promscrape.Sample, error) {
		at := time.Now()
		smp, err := scrape(ctx)
		if err == nil && !smp.At.Before(at) {
			seen()
		}
		// Only a sample taken by this call: an earlier one handed out
		// again says nothing of the requests overtaken since.
		if err == nil && smp.HasRunning && smp.HasWaiting && !smp.At.Before(at) {
			c.ObserveLoad(at, smp.Running, smp.Waiting)
		}
		return smp, err
	}
}

// baseURLs are the endpoints the run sends to: BaseURLs, else BaseURL.
func (s Setup) baseURLs() []string {
	if len(s.BaseURLs) > 0 {
		return s.BaseURLs
	}
	return []string{s.BaseURL}
}

// reasoningSample is how many first answers the reasoning check reads:
// reasoningSample, or what is left of the job when that is less.
func (r *Runner) reasoningSample() int {
	return int(min(max(r.keysLeft(), 1), pool.ReasoningSample))
}

// noReasoning says, once, that the server sends no reasoning: on Log and
// in status.json's warnings (the writer goroutine calls it).
func (r *Runner) noReasoning(e *pool.NoReasoningError) {
	msg := fmt.Sprintf("%v; %s", e, e.Hint())
	fmt.Fprintf(r.setup.Log, "warning: %s\n", msg)
	if r.setup.RequireReasoning {
		fmt.Fprintf(r.setup.Log, "generation.require_reasoning: no new requests; the ones in flight finish, what was written is kept\n")
		r.status.SetState(runfiles.StateDraining)
	}
	r.status.AddWarning(msg)
}

// tokenIDsPolicy checks the first answers for ids when the job asks for
// them, as many as the reasoning check reads.
func (r *Runner) tokenIDsPolicy() pool.TokenIDsPolicy {
	if !r.job.Sampling.ReturnTokenIDs {
		return pool.TokenIDsPolicy{}
	}
	return pool.TokenIDsPolicy{Sample: r.reasoningSample(), Require: r.setup.RequireTokenIDs, OnFound: r.noTokenIDs, Server: r.server}
}

// noTokenIDs says, once, that the server sends no token ids: on Log and in
// status.json's warnings (the writer goroutine calls it).
func (r *Runner) noTokenIDs(e *pool.NoTokenIDsError) {
	msg := fmt.Sprintf("%v; %s", e, e.Hint())
	fmt.Fprintf(r.setup.Log, "warning: %s\n", msg)
	if r.setup.RequireTokenIDs {
		fmt.Fprintf(r.setup.Log, "generation.require_token_ids: no new requests; the ones in flight finish, what was written is kept\n")
		r.status.SetState(runfiles.StateDraining)
	}
	r.status.AddWarning(msg)
}

// openStatus prepares status.json and report.json; the sink holds the
// directory's lock, so what a killed run left of them can go.
func (r *Runner) openStatus() {
	if r.setup.Auto {
		r.auto = autoconc.NewState(r.startLimit(), r.setup.Concurrency)
	}
	r.status = runfiles.NewStatusWriter(r.setup.Dir, r.setup.Started, newReportConfig(r.job, r.setup), r.auto)
	if err := r.status.RemoveLeftovers(); err != nil {
		fmt.Fprintf(r.setup.Log, "warning: %v\n", err)
	}
}

// pinDataset fixes what the job reads: an hf:// dataset the commit its
// branch points at (or, resuming, the commit the directory read before),
// local files their content. It returns the options to read them with.
func (r *Runner) pinDataset(ctx context.Context) (dataset.Options, error) {
	s := r.setup
	opts := dataset.Options{
		Selection:     r.job.Selection,
		Conversations: r.job.Prompt.Whole(),
		Template:      r.job.Prompt.Template,
		OnBadRow:      s.OnBadRow,
		OnSkip:        s.OnSkip,
		OnIgnored:     s.OnIgnored,
		OnDownload:    s.OnDownload,
		Remote:        s.Remote,
		Outputs:       s.Outputs,
		Context:       ctx, // Ctrl-C ends a Hub download; it resumes next time
	}
	if out, ok, err := dataset.StampOutput(opts); ok || err != nil {
		// A synthgen output directory (a first pass): its content is its
		// job and its final parts as they are now.
		if err != nil {
			return opts, &DatasetError{Err: err}
		}
		if sameDir(opts.Path, s.Dir) {
			return opts, &DatasetError{Err: fmt.Errorf("dataset.path %s is output.dir: a pass reads another run's output directory, and writes its own", opts.Path)}
		}
		r.job.Selection.Output = out
		opts.Selection = r.job.Selection
		if n := audit.FirstPassNote(opts.Path); n != "" {
			fmt.Fprintf(s.Log, "note: %s\n", n) // done N/N would not say it
		}
		return opts, nil
	}
	if !strings.HasPrefix(opts.Path, "hf://") {
		if !s.Rehash {
			opts.Known = r.resumedStamps()
		}
		content, err := dataset.Stamp(opts)
		if err != nil {
			return opts, &DatasetError{Err: err}
		}
		if r.job.Selection.ByFile() {
			// Each shard stamps its own files; the job is the listing of
			// them all, which every shard reads alike (a stat each).
			files, err := dataset.List(opts)
			if err != nil {
				return opts, &DatasetError{Err: err}
			}
			r.job.Selection.Files, r.job.Selection.ShardContent = files, content
		} else {
			r.job.Selection.Content = content
		}
		opts.Selection = r.job.Selection
		opts.Known = nil
		return opts, nil
	}
	rev, err := r.resumedRevision(opts.Path)
	if err == nil && rev == "" {
		rev, err = dataset.Identity(opts)
	}
	if err != nil {
		return opts, &DatasetError{Err: err, Hub: true}
	}
	if rev != opts.Path {
		fmt.Fprintf(s.Log, "dataset: %s is %s\n", opts.Path, rev)
		r.job.Selection.Revision = rev
	}
	opts.Selection = r.job.Selection
	return opts, nil
}

// resumedRevision is the commit the directory read path at, when it holds
// a job that read the same hf:// path: a resume reads the same rows (and
// needs no network), even when the branch moved since.
func (r *Runner) resumedRevision(path string) (string, error) {
	m, err := sink.ReadManifest(r.setup.Dir)
	if err != nil {
		return "", nil // a new directory, or one the sink will report on
	}
	old, err := job.ManifestJob(r.setup.Dir, m.Job, m.Identity)
	if err != nil || old.Selection.Path != path {
		return "", nil
	}
	return old.Selection.Revision, nil
}

// resumedStamps are the stamps of the dataset's files the directory's job
// recorded, which Stamp trusts for the files that did not change: a resume
// does not read hundreds of GB to find them as they were. None for a new
// directory, or one another dataset made.
func (r *Runner) resumedStamps() stamp.Content {
	m, err := sink.ReadManifest(r.setup.Dir)
	if err != nil {
		return nil
	}
	old, err := job.ManifestJob(r.setup.Dir, m.Job, m.Identity)
	if err != nil {
		return nil
	}
	return append(old.Selection.Content, old.Selection.ShardContent...)
}

// Job is the job as run: model resolved, dataset pinned.
func (r *Runner) Job() job.Job { return r.job }

// MaxModelLen is the model's context as the server listed it (vLLM's
// max_model_len); 0 when it did not say.
func (r *Runner) MaxModelLen() int { return r.maxModelLen }

// BatchesResumed is the number of batches an earlier run submitted that
// this one collects (0 outside the batch mode).
func (r *Runner) BatchesResumed() int {
	if r.batch == nil {
		return 0
	}
	return r.batch.Resumed()
}

// BatchesSettling is how many of the batches an earlier run left it may
// have been creating as it stopped, and how long until they are looked
// for in the server's list (batch.Batcher.Settling; 0 outside the batch
// mode).
func (r *Runner) BatchesSettling() (int, time.Duration) {
	if r.batch == nil {
		return 0, 0
	}
	return r.batch.Settling()
}

// Keys is the number of keys (rows x samples) the job selects.
func (r *Runner) Keys() int64 { return r.job.Total(r.rows) }

// keysLeft is how many of the job's keys the directory does not hold yet
// (fewer when the dataset repeats ids).
func (r *Runner) keysLeft() int64 { return r.Keys() - int64(r.out.DoneCount()) }

// Rows is the number of dataset rows the job selects.
func (r *Runner) Rows() int64 { return r.rows }

// OnDisk is the number of records in the output directory.
func (r *Runner) OnDisk() int { return r.out.DoneCount() }

// FailedOpen is the number of keys that failed for good and that no record
// superseded.
func (r *Runner) FailedOpen() int { return r.out.FailedCount() }

// Drain stops intake: the requests in flight finish, nothing new starts;
// status.json says draining from the next heartbeat on. Safe from any
// goroutine, before or during Run.
func (r *Runner) Drain() {
	r.status.SetState(runfiles.StateDraining)
	r.eng.Drain()
	if r.batch != nil {
		r.batch.Drain() // the open batch goes: intake has stopped
	}
}

// Status is the run's status.json and report.json writer, for what follows
// the run in the same process (the hidden-state pass) once Run returned.
func (r *Runner) Status() *runfiles.StatusWriter { return r.status }

// Heartbeat rewrites status.json with rec (a progress record of the run's
// Stats, with the server's view when the caller scrapes it) and the current
// state. Safe from any goroutine; the caller's reporter calls it every
// interval.
func (r *Runner) Heartbeat(rec runstats.ProgressRecord) error {
	return r.status.Heartbeat(rec)
}

// closeOutput closes the output directory (finalizing its parts and the
// manifest, which records outcome for inspect's run history) and the
// dataset.
func (r *Runner) closeOutput(outcome Outcome) error {
	_ = r.src.Close() // read-only: nothing to lose
	r.out.SetOutcome(string(outcome))
	if err := r.out.Close(); err != nil {
		return fmt.Errorf("close output %s: %w", r.setup.Dir, err)
	}
	return nil
}

// DatasetError is a dataset that cannot be read as configured.
type DatasetError struct {
	Err error
	Hub bool // reaching or reading an hf:// dataset
}

func (e *DatasetError) Error() string { return e.Err.Error() }
func (e *DatasetError) Unwrap() error { return e.Err }

// newReportConfig summarizes job (as run: model resolved) run by s.
func newReportConfig(j job.Job, s Setup) runfiles.ReportConfig {
	return runfiles.ReportConfig{
		BaseURL:      redact.URLs(s.baseURLs()),
		Model:        j.Sampling.Model,
		Dataset:      j.Selection.Path,
		Format:       j.Selection.Format,
		Limit:        j.Selection.Limit,
		Shard:        j.Selection.Shard.String(),
		Concurrency:  s.Concurrency,
		Samples:      j.Sampling.Samples,
		MaxTokens:    j.Sampling.MaxTokens,
		Stream:       s.Stream,
		OutputFormat: s.Format,
	}
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
