package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/hub"
	"github.com/synthgen/synthgen/dataset/outdir"
	"github.com/synthgen/synthgen/dataset/template"
	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/redact"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/ui/progress"
)

// runFlags are the run flags that are not config keys.
type runFlags struct {
	configFile  string
	force       bool
	retryErrors bool
	rehash      bool
	shard       string
	quiet       bool
	logFormat   string
	metricsAddr string
}

func newRunCmd() *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Generate answers for every prompt of the dataset (resumes an existing output.dir)",
		Long: `run sends every prompt of dataset.path to the server at endpoint.base_url with
concurrency requests in flight and writes one record per (id, sample) under
output.dir. Running it again on the same output.dir resumes: prompts already
answered are skipped, nothing is written twice.

A bare run needs a dataset (dataset.path has no default) and a server
(endpoint.base_url, default http://localhost:8000/v1): try
'synthgen run --config examples/sample.yaml' beside 'synthgen mock', or
'make run' in the repository.

Settings come from --config FILE (YAML, TOML or JSON), then SYNTHGEN_* environment
variables (SYNTHGEN_ENDPOINT_BASE_URL, SYNTHGEN_CONCURRENCY, ...), then flags; a
flag wins. Every config key is also a flag with its dotted name.

The first Ctrl-C (or SIGTERM) stops taking new prompts and lets the requests in
flight finish for up to shutdown.grace; a second one stops at once. SIGHUP is
ignored, so the job survives the closing of its terminal under nohup.`,
		Example: `  synthgen run --config examples/sample.yaml
  synthgen run --config my.yaml --concurrency 64 --dataset.limit 1000
  nohup synthgen run --config my.yaml >> gen.log 2>&1 &   # >>: a resume appends`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd, rf)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&rf.configFile, "config", "", "config file (YAML, TOML or JSON); its keys are those of the flags below")
	fs.BoolVar(&rf.force, "force", false, "resume even though the job differs from the one in output.dir's manifest (settings that change the answers, --shard, or the dataset's files); what was forced is recorded there")
	fs.BoolVar(&rf.retryErrors, "retry-errors", false, "request again the prompts that failed for good in an earlier run (listed in output.dir/errors)")
	fs.StringVar(&rf.shard, "shard", "", "run only shard i of n of the dataset, as \"i/n\" (rows whose index mod n is i; with dataset.shard_by files, the files whose place mod n is i), e.g. for a Slurm array or a Kubernetes Indexed Job; each shard writes its own output.dir, which records it")
	fs.BoolVar(&rf.rehash, "rehash", false, "read and hash every byte of the dataset's files again; without it a resume takes the hash of a file that kept its path, size, modification time and inode from output.dir's manifest")
	fs.BoolVarP(&rf.quiet, "quiet", "q", false, "print no progress, only the final summary and errors")
	fs.StringVar(&rf.logFormat, "log-format", "text", "progress format: text (a bar on a terminal, else one line per progress.interval) or json (one object per progress.interval, also on a terminal)")
	fs.StringVar(&rf.metricsAddr, "metrics-addr", "", "serve synthgen's own Prometheus metrics on this address, e.g. 127.0.0.1:9464 (this machine only; :9464 listens on every interface, and says so) (empty: off)")
	config.RegisterFlags(fs)
	return cmd
}

func runRun(cmd *cobra.Command, rf runFlags) error {
	cfg, from, shard, err := loadRunConfig(cmd, rf)
	if err != nil {
		return err
	}
	j := cfg.Job(shard)
	shaped, err := checkResponseFormat(cfg, from, j)
	if err != nil {
		return err
	}
	rs := &runSession{cfg: cfg, rf: rf, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), stats: runstats.NewStats(nil)}
	setup := runSetup(cfg, rf, j, rs.stats, rs.stderr)
	setup.Shape = shaped // compiled once
	metricsSetup(&setup, cfg, rf, rs.stderr)
	if setup.TLS, err = wire.ClientTLS(cfg.Endpoint.CAFile, cfg.Endpoint.InsecureSkipVerify); err != nil {
		return usageError(err, "endpoint.ca_file is a PEM file of the CA certificates that signed the server's certificate")
	}
	if cfg.Endpoint.InsecureSkipVerify {
		fmt.Fprintln(rs.stderr, "WARNING: endpoint.insecure_skip_verify is set: the server's TLS certificate is NOT checked; anyone on the path can pose as the server and read the prompts, the answers and the API key. Use endpoint.ca_file instead.")
	}
	setup.Started = time.Now()
	rs.sd = newShutdown(cmd.Context(), cfg.Shutdown.Grace, rs.stderr)
	defer rs.sd.stop()
	// synthgen's own metrics are up from here, while the server may still be
	// loading, until the run ends; a taken address fails before any work.
	var metrics *selfMetricsServer
	if rf.metricsAddr != "" {
		if metrics, err = startSelfMetrics(rf.metricsAddr, rs.stats, rs.stderr); err != nil {
			return usageError(err, "pass a free HOST:PORT, e.g. --metrics-addr 127.0.0.1:9464, or leave it empty")
		}
		defer metrics.Close()
	}
	r, err := generator.Open(rs.sd.ctx, setup)
	if de := diskError(cfg.Output.Dir, err); de != nil {
		return rs.sd.early(de)
	}
	if err != nil {
		var mm *job.MismatchError
		if errors.As(err, &mm) {
			mm.From = changeSources(mm.Changes, from, cfg, rf)
		}
		return rs.sd.early(openError(err))
	}
	if !rf.quiet {
		printHeader(rs.stderr, cfg, r, metrics)
	}
	metrics.registerAuto(r.Auto())
	err = rs.run(r)
	// The hidden-state pass follows a run that ended, failed keys or not
	// (the records written have their states); not one stopped or broken.
	var ee *exitError
	if !cfg.Hidden.Enabled || rs.sd.ctx.Err() != nil || (err != nil && !(errors.As(err, &ee) && ee.code == exitIncomplete)) {
		return err
	}
	return rs.runHidden(r.Status(), err)
}

// runSession is one `synthgen run` once its configuration is read: where
// its words go, its signals and its figures.
type runSession struct {
	cfg            config.Config
	rf             runFlags
	stdout, stderr io.Writer
	sd             *shutdown
	stats          *runstats.Stats
}

// run runs the opened r to its end: the first signal drains, the reporter
// renders (and hands r its heartbeats), and the verdict goes to
// report.json and becomes the error main exits with.
func (rs *runSession) run(r *generator.Runner) error {
	rep := rs.newReporter(r)
	rs.sd.arm(func() {
		snap := rs.stats.Snapshot()
		fmt.Fprintf(rs.stderr, "\nstopping: no new requests; waiting up to %s for the %d in flight (Ctrl-C again to stop now)\n",
			rs.cfg.Shutdown.Grace, snap.InFlight)
		// The progress shows the drain instead of the job's ETA.
		rep.Draining(snap.At, rs.cfg.Shutdown.Grace)
		r.Drain()
	})
	res, err := r.Run(rs.sd.ctx, generator.Hooks{
		Progress:    func(ctx context.Context) { rep.Run(ctx, rs.stats) },
		Interrupted: rs.sd.interrupted,
		Verdict:     func(res generator.Result) error { return runResult(rs.cfg, res, rs.stderr, rs.notes()) },
		ExitCode:    runExitCode,
		Final:       func() runstats.ProgressRecord { return rep.Record(rs.stats.Snapshot()) },
	})
	if errors.As(res.Err, new(*autoconc.RefusedError)) {
		return err // refused before the first request: nothing ran to sum up
	}
	fmt.Fprint(rs.stdout, rep.Summary(rs.stats, string(res.Outcome)))
	if res.Summary.Duplicates > 0 {
		fmt.Fprintf(rs.stderr, "warning: %d dataset rows repeat an earlier row's id and were skipped as bad rows (each named above); an id is asked once, by its first row: is %s unique?\n",
			res.Summary.Duplicates, idName(rs.cfg))
	}
	return err
}

// notes is where what is neither a warning nor an error goes (the start
// lines, "nothing to do", a download's progress): nowhere with --quiet,
// which prints the summary alone.
func (rs *runSession) notes() io.Writer { return notesOf(rs.rf, rs.stderr) }

func notesOf(rf runFlags, stderr io.Writer) io.Writer {
	if rf.quiet {
		return io.Discard
	}
	return stderr
}

// idName is where the dataset's ids come from, for a message.
func idName(cfg config.Config) string {
	if cfg.Dataset.IDField != "" {
		return "dataset.id_field (" + cfg.Dataset.IDField + ")"
	}
	return "custom_id"
}

// runExitCode is the exit code main gives err; nil is success.
func runExitCode(err error) int {
	if err == nil {
		return exitOK
	}
	return exitCode(err)
}

// loadRunConfig reads the configuration and the run flags that are not
// config keys, naming what is wrong.
func loadRunConfig(cmd *cobra.Command, rf runFlags) (config.Config, config.Sources, dataset.Shard, error) {
	cfg, from, err := config.LoadWithSources(cmd.Flags(), rf.configFile)
	if err != nil {
		return cfg, from, dataset.Shard{}, usageError(err, configHint(err))
	}
	warnUnknownEnv(cmd.ErrOrStderr(), cfg)
	if err := datasetGiven(cfg, from); err != nil {
		return cfg, from, dataset.Shard{}, err
	}
	if rf.logFormat != "text" && rf.logFormat != "json" {
		return cfg, from, dataset.Shard{}, usageError(fmt.Errorf("--log-format: %q is not one of text, json", rf.logFormat), "")
	}
	shard, err := dataset.ParseShard(rf.shard)
	if err != nil {
		return cfg, from, shard, usageError(fmt.Errorf("--shard: %w", err), "")
	}
	if _, err := template.Compile(cfg.Template()); err != nil {
		// Parsed here, before any work, where the key was set.
		if src := from[template.Key]; src != "" {
			err = fmt.Errorf("%s: %w", src, err)
		}
		return cfg, from, shard, usageError(err, "prompt.messages holds Go text/template turns: see docs/recipes.md, \"Prompts from any columns\", for the fields and helpers")
	}
	return cfg, from, shard, nil
}

// changeSources says where each changed setting's new value came from, for
// the refusal of a resume: the config keys by their source, the shard by
// --shard (none without: "all" says it); the dataset's files have none.
func changeSources(changes []job.Change, from config.Sources, cfg config.Config, rf runFlags) map[string]string {
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[k] = true
	}
	out := map[string]string{}
	for _, c := range changes {
		switch {
		case c.Key == "shard" && rf.shard != "":
			out[c.Key] = "flag --shard"
		case c.Key == "endpoint.model" && cfg.Endpoint.Model == "":
			out[c.Key] = "the server's first model, endpoint.model being empty"
		case keys[c.Key]:
			out[c.Key] = from.Of(c.Key)
		}
	}
	return out
}

// configHint is what to do about an error of config.Load: an error about a
// key names it, one about the file (missing, unreadable, not parsed) does
// not.
func configHint(err error) string {
	var (
		uk *config.UnknownKeyError
		fe *config.FieldError
	)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the config file does not exist: check the path given to --config (a relative path is from the current directory)"
	case errors.Is(err, fs.ErrPermission):
		return "the config file cannot be read: check its permissions"
	case errors.As(err, &uk), errors.As(err, &fe):
		return "fix the key named above, or see 'synthgen run --help' for every key and its default"
	}
	return "fix the config file where named above (it is YAML, TOML or JSON by its extension)"
}

// datasetGiven refuses a run without a dataset: dataset.path has no
// default, and the error says where to set it (or where it was set empty).
func datasetGiven(cfg config.Config, from config.Sources) error {
	const key = "dataset.path"
	if strings.TrimSpace(cfg.Dataset.Path) != "" {
		return nil
	}
	hint := "dataset.path is a file, a glob or hf://owner/name; see 'synthgen run --help'"
	if src := from[key]; src != "" {
		return usageError(fmt.Errorf("%s: %s is empty: no dataset given", src, key), hint)
	}
	return usageError(fmt.Errorf("no dataset given: set %s (in --config FILE, %s or --%s)", key, config.EnvName(key), key), hint)
}

// otherEnv are the SYNTHGEN_* variables read that are not config keys:
// the Hub cache (dataset/hub/env.go) and examples/nohup-run.sh's own.
var otherEnv = []string{"SYNTHGEN_CACHE_DIR", "SYNTHGEN_BIN", "SYNTHGEN_LOG"}

// warnUnknownEnv says which SYNTHGEN_* variables set nothing (a typo such
// as SYNTHGEN_CONCURENCY would otherwise be ignored silently), with the
// nearest one that is read. The variable endpoint.api_key_env names is read.
func warnUnknownEnv(w io.Writer, cfg config.Config) {
	for _, e := range config.UnknownEnv(os.Environ(), append([]string{cfg.Endpoint.APIKeyEnv}, otherEnv...)...) {
		fmt.Fprintf(w, "warning: %v\n", e)
	}
}

// runSetup is how the configuration runs job.
func runSetup(cfg config.Config, rf runFlags, job job.Job, stats *runstats.Stats, stderr io.Writer) generator.Setup {
	return generator.Setup{
		Job:          job,
		BaseURL:      cfg.Endpoint.BaseURL,
		BaseURLs:     severalURLs(cfg.Endpoint.BaseURLs()),
		APIKey:       cfg.APIKey(),
		Timeout:      cfg.Endpoint.Timeout,
		StallTimeout: cfg.Endpoint.StallTimeout,
		Concurrency:  cfg.PoolSize(),
		Auto:         cfg.ConcurrencyAuto && !cfg.Batch.Enabled,
		Stream:       cfg.Generation.Stream,
		Batch:        cfg.BatchOptions(),
		Rate: pool.RateLimits{
			RequestsPerMinute: cfg.Endpoint.MaxRequestsPerMinute,
			TokensPerMinute:   cfg.Endpoint.MaxTokensPerMinute,
		},
		Retry: pool.RetryPolicy{
			MaxAttempts:    cfg.Retry.MaxAttempts,
			InitialBackoff: cfg.Retry.InitialBackoff,
			MaxBackoff:     cfg.Retry.MaxBackoff,
		},
		Dir:              cfg.Output.Dir,
		Format:           cfg.Output.Format,
		PartSize:         cfg.Output.ShardSize,
		SyncInterval:     cfg.Output.SyncInterval,
		RetryErrors:      rf.retryErrors,
		Force:            rf.force,
		Rehash:           rf.rehash,
		RequireReasoning: cfg.Generation.RequireReasoning,
		NPerRequest:      cfg.Generation.NPerRequest,
		LongestFirst:     cfg.Generation.LongestFirst,
		SchemaRetries:    cfg.Generation.SchemaRetries,
		RequireTokenIDs:  cfg.Generation.RequireTokenIDs,
		OnBadRow:         cfg.Dataset.OnBadRow,
		OnIgnored: func(field, location string) {
			fmt.Fprintf(stderr, "note: %s sets %s, which is not sent: generation.stream (%v) says how answers are read (said once)\n", location, field, cfg.Generation.Stream)
		},
		OnSkip: func(e *dataset.RowError) {
			fmt.Fprintf(stderr, "skip row %s (dataset.on_bad_row: skip)\n", e)
		},
		OnDownload: downloadReporter(notesOf(rf, stderr)),
		Remote:     hub.Remote{},
		Outputs:    outdir.Reader{},
		Version:    version,
		Config:     cfg.Redacted(),
		Price:      priceOf(cfg.Endpoint.Price, cfg.PriceFactor()),
		Stats:      stats,
		Log:        stderr,
	}
}

// metricsSetup gives s the endpoints' /metrics (none when the config gives
// no URL for them; concurrency: auto then refuses the run before its first
// request): scraped once every interval for the progress line, status.json
// and auto alike, at the faster of progress.interval and auto's pace.
// auto's moves are said on stderr unless --quiet.
func metricsSetup(s *generator.Setup, cfg config.Config, rf runFlags, stderr io.Writer) {
	s.Metrics = serverMetrics(cfg)
	s.MetricsInterval = progress.Interval(cfg.Progress.Interval)
	if cfg.ConcurrencyAuto {
		s.AutoInterval = autoInterval(cfg.Progress.Interval)
		s.MetricsInterval = min(s.MetricsInterval, s.AutoInterval)
	}
	s.AutoLog = notesOf(rf, stderr)
}

// openError turns why a run could not start into what main prints: the
// exit code and what to do.
func openError(err error) error {
	var (
		de *generator.DatasetError
		me *wire.ModelError
		se *wire.ServerError
		mm *job.MismatchError
		sf *dataset.ShardFilesError
	)
	switch {
	case errors.As(err, &de) && de.Hub:
		return usageError(err, hubHint(err))
	case errors.As(err, &sf):
		n := sf.Files
		return usageError(err, fmt.Sprintf("there are more workers than files: split by file, %d files make at most %d shards, and shard %s has none. "+
			"Run %d (--shard 0/%d to %d/%d: a Slurm --array=0-%d, a Kubernetes Indexed Job of completions: %d), or set dataset.shard_by: rows to split the rows among any number",
			n, n, sf.Shard, n, n, n-1, n, n-1, n))
	case errors.As(err, &de):
		return usageError(err, "check dataset.path and dataset.format")
	case errors.As(err, &me) && len(me.Served) > 0:
		return usageError(err, "set endpoint.model to one of them, or leave it empty to take the first")
	case errors.As(err, &se) && wire.IsCertificateError(err):
		return &exitError{code: exitFailure, err: err, hint: "the server's TLS certificate is not signed by a CA this machine trusts: set endpoint.ca_file to the PEM bundle of its CA (or, for testing only, endpoint.insecure_skip_verify: true)"}
	case errors.As(err, &se) && se.NeedsKey():
		return &exitError{code: exitFailure, err: err, hint: "the server wants an API key: put it in the environment variable named by endpoint.api_key_env (default OPENAI_API_KEY)"}
	case errors.As(err, &se):
		return &exitError{code: exitFailure, err: err, hint: "is the server running? check endpoint.base_url (it ends in /v1)"}
	case errors.As(err, &mm):
		return usageError(err, "")
	}
	return err
}

func printHeader(stderr io.Writer, cfg config.Config, r *generator.Runner, metrics *selfMetricsServer) {
	job := r.Job()
	flight := config.FormatConcurrency(cfg.Concurrency, cfg.ConcurrencyAuto) + " in flight"
	if b := cfg.Batch; b.Enabled {
		// The pool holds a batch's worth of rows per batch in flight, but
		// nothing is in flight at the server until a batch is submitted.
		flight = fmt.Sprintf("batch mode: up to %d requests a batch, %d batches at once", b.MaxRequests, b.InFlight)
	}
	fmt.Fprintf(stderr, "synthgen %s: %d prompts from %s -> %s (%s), model %s at %s, %s\n",
		version, r.Rows(), job.Selection.Path, cfg.Output.Dir, cfg.Output.Format, job.Sampling.Model,
		redact.URLs(cfg.Endpoint.BaseURLs()), flight)
	if n := r.BatchesResumed(); n > 0 {
		fmt.Fprintf(stderr, "batch: collecting %d batches an earlier run submitted\n", n)
	}
	if n, wait := r.BatchesSettling(); n > 0 && wait > 0 {
		// A creation the killed run had in flight can still be made by
		// the server: looked for at once, it would be missed and made twice.
		fmt.Fprintf(stderr, "batch: %d of them may have been in creation when the earlier run stopped; looking for them in the server's list in %s\n",
			n, wait.Round(100*time.Millisecond))
	}
	if n := r.MaxModelLen(); n > 0 {
		// A prompt plus max_tokens longer than this is refused (too_long).
		fmt.Fprintf(stderr, "model context: max_model_len %d tokens\n", n)
	}
	if n := r.OnDisk(); n > 0 {
		// What is left needs the selection's keys on disk, which the
		// producer learns as it reads; records outside the selection (a
		// lowered limit) or failed keys make it differ, so "about": the
		// progress line counts it exactly.
		keys := r.Keys()
		fmt.Fprintf(stderr, "resuming: %d records already in %s; about %d of %d keys to go\n",
			n, cfg.Output.Dir, max(keys-int64(n), 0), keys)
	}
	if metrics != nil {
		fmt.Fprintf(stderr, "metrics: synthgen's own at %s\n", metrics.URL())
	}
}

// severalURLs is urls when there are several (generator.Setup.BaseURLs),
// else nil: one URL is Setup.BaseURL, as it always was.
func severalURLs(urls []string) []string {
	if len(urls) < 2 {
		return nil
	}
	return urls
}

// newReporter is the run's reporter: the bar or the plain lines, each
// record handed to r for status.json, the server's view from its /metrics.
func (rs *runSession) newReporter(r *generator.Runner) *progress.Reporter {
	opts := progress.Options{
		TTY:      progress.IsTerminal(os.Stdout) && rs.stdout == io.Writer(os.Stdout),
		Interval: rs.cfg.Progress.Interval,
		Quiet:    rs.rf.quiet,
		JSON:     rs.rf.logFormat == "json",
		Auto:     autoRecordOf(r),
		Status: func(rec runstats.ProgressRecord, final bool) {
			if final {
				return // Run writes the last one, with the outcome
			}
			// A heartbeat that cannot be written is not worth stopping for.
			_ = r.Heartbeat(rec)
		},
	}
	// The server's own /metrics, as the run's one feed reads them: one, or
	// each endpoint's, summed.
	if scrapes := r.ServerSources(); len(scrapes) == 1 {
		opts.Scrape = scrapes[0]
	} else {
		opts.ScrapeEach = scrapes
	}
	return progress.New(rs.stdout, opts)
}

// runResult turns how the engine and the sink ended into the error run
// returns (nil: every selected key is done), saying "nothing to do" when
// that was the case.
func runResult(cfg config.Config, res generator.Result, stderr, notes io.Writer) error {
	runErr, closeErr, sum, onDisk, failed := res.Err, res.CloseErr, res.Summary, res.OnDisk, res.Failed
	// A sink that failed on a full disk fails to close with the same error:
	// the message below says it once.
	sameDisk := diskError(cfg.Output.Dir, runErr) != nil && diskError(cfg.Output.Dir, closeErr) != nil
	if runErr != nil && closeErr != nil && !sameDisk {
		// The run's error is the one returned; the sink's is said too, as
		// what it left (temporaries the next run recovers) matters.
		fmt.Fprintf(stderr, "warning: close output %s: %v\n", cfg.Output.Dir, closeErr)
	}
	switch {
	case runErr != nil:
		var re *dataset.RowError
		var nr *pool.NoReasoningError
		var refused *autoconc.RefusedError
		if errors.As(runErr, &refused) {
			return usageError(refused.Err, refused.Hint)
		}
		if errors.As(runErr, &nr) {
			return &exitError{code: exitFailure, err: fmt.Errorf("generation.require_reasoning: %w (what was written is kept)", runErr),
				hint: nr.Hint() + "; then rerun to resume (or set generation.require_reasoning: false to only warn)"}
		}
		var ni *pool.NoTokenIDsError
		if errors.As(runErr, &ni) {
			return &exitError{code: exitFailure, err: fmt.Errorf("generation.require_token_ids: %w (what was written is kept)", runErr),
				hint: ni.Hint() + "; then rerun to resume (or set generation.require_token_ids: false to only warn)"}
		}
		if errors.As(runErr, &re) {
			return usageError(runErr, "fix the row, or set dataset.on_bad_row: skip to skip bad rows; what was written is kept, rerun to resume")
		}
		if de := diskError(cfg.Output.Dir, runErr); de != nil {
			return de
		}
		return fmt.Errorf("%w (what was written is kept; rerun to resume)", runErr)
	case closeErr != nil:
		if de := diskError(cfg.Output.Dir, closeErr); de != nil {
			return de
		}
		return fmt.Errorf("close output %s: %w", cfg.Output.Dir, closeErr)
	case res.Interrupted:
		return &exitError{code: exitInterrupted, asked: true,
			err: fmt.Errorf("interrupted: %d new records written; run the same command to resume", sum.Written)}
	}
	if sum.Written == 0 && sum.Failed == 0 && (sum.Skipped > 0 || sum.SkippedFailed > 0) {
		switch {
		case sum.SkippedFailed > 0:
			// Failed keys are not done: say them apart, and how to ask them
			// (a warning: said with --quiet too).
			fmt.Fprintf(stderr, "nothing to do without --retry-errors: %d selected keys are done, %d failed for good in earlier runs\n",
				sum.Skipped, sum.SkippedFailed)
		case cfg.Dataset.Limit > 0 && int64(onDisk) > sum.Skipped:
			// A limit shrunk below what an earlier run wrote: say why the
			// rest is not touched, so it does not look like lost records.
			fmt.Fprintf(notes, "nothing to do: all %d keys selected by dataset.limit %d are done; %d records are in %s\n",
				sum.Skipped, cfg.Dataset.Limit, onDisk, cfg.Output.Dir)
		case int64(onDisk) > sum.Skipped:
			fmt.Fprintf(notes, "nothing to do: all %d selected keys are done; %d records are in %s\n",
				sum.Skipped, onDisk, cfg.Output.Dir)
		default:
			fmt.Fprintf(notes, "nothing to do: all %d selected keys are already in %s\n", sum.Skipped, cfg.Output.Dir)
		}
	}
	if failed > 0 {
		return &exitError{code: exitIncomplete, err: fmt.Errorf("%d requests failed for good (see %s/errors)", failed, cfg.Output.Dir),
			hint: "fix the cause, then rerun with --retry-errors to request them again"}
	}
	return nil
}

func hubHint(err error) string {
	switch {
	case errors.Is(err, hub.ErrHubAccess):
		return "a gated or private dataset needs a token: export HF_TOKEN=..."
	case errors.Is(err, hub.ErrHubUnreachable):
		return "no route to the Hub from here? download the files elsewhere and point dataset.path at them (or set HF_ENDPOINT to a mirror)"
	case errors.Is(err, hub.ErrHubNotFound):
		return "check the owner/name and the @revision of dataset.path"
	}
	return "check dataset.path"
}

// downloadReporter prints a Hub download's progress at most every 10 s and
// when each file completes: fetching six 1 GB files takes a while, and a
// silent start looks like a hang.
func downloadReporter(w io.Writer) func(file string, done, total int64) {
	var last time.Time
	return func(file string, done, total int64) {
		if done < total && time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "download %s %.1f/%.1f MiB\n", file, float64(done)/(1<<20), float64(total)/(1<<20))
	}
}
