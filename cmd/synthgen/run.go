package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/sink"
)

// runFlags are the run flags that are not config keys.
type runFlags struct {
	configFile  string
	force       bool
	retryErrors bool
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

Settings come from --config FILE (YAML, TOML or JSON), then SYNTHGEN_* environment
variables (SYNTHGEN_ENDPOINT_BASE_URL, SYNTHGEN_CONCURRENCY, ...), then flags; a
flag wins. Every config key is also a flag with its dotted name.

The first Ctrl-C (or SIGTERM) stops taking new prompts and lets the requests in
flight finish for up to shutdown.grace; a second one stops at once. SIGHUP is
ignored, so the job survives the closing of its terminal under nohup.`,
		Example: `  synthgen run --config examples/sample.yaml
  synthgen run --config my.yaml --concurrency 64 --dataset.limit 1000
  nohup synthgen run --config my.yaml > gen.log 2>&1 &`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd, rf)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&rf.configFile, "config", "", "config file (YAML, TOML or JSON); its keys are those of the flags below")
	fs.BoolVar(&rf.force, "force", false, "resume even though settings that change the answers differ from the ones in output.dir's manifest")
	fs.BoolVar(&rf.retryErrors, "retry-errors", false, "request again the prompts that failed for good in an earlier run (listed in output.dir/errors)")
	fs.StringVar(&rf.shard, "shard", "", "run only shard i of n of the dataset, as \"i/n\" (rows whose index mod n is i), e.g. for a Slurm array or a Kubernetes Indexed Job")
	fs.BoolVarP(&rf.quiet, "quiet", "q", false, "print no progress, only the final summary and errors")
	fs.StringVar(&rf.logFormat, "log-format", "text", "progress format: text (a bar on a terminal, else one line per progress.interval) or json (one object per progress.interval, also on a terminal)")
	fs.StringVar(&rf.metricsAddr, "metrics-addr", "", "serve synthgen's own Prometheus metrics on this address, e.g. 127.0.0.1:9464 (empty: off)")
	config.RegisterFlags(fs)
	return cmd
}

func runRun(cmd *cobra.Command, rf runFlags) error {
	cfg, err := config.Load(cmd.Flags(), rf.configFile)
	if err != nil {
		return usageError(err, "fix the key named above, or see 'synthgen run --help' for every key and its default")
	}
	if rf.logFormat != "text" && rf.logFormat != "json" {
		return usageError(fmt.Errorf("--log-format: %q is not one of text, json", rf.logFormat), "")
	}
	shard, nshards, err := parseShard(rf.shard)
	if err != nil {
		return usageError(err, "")
	}
	started := time.Now()
	stderr := cmd.ErrOrStderr()
	stdout := cmd.OutOrStdout()

	// Two-stage shutdown: the first signal drains, the second (or the end of
	// the grace period) cancels the requests in flight. The sink is closed
	// cleanly in every case.
	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	signal.Ignore(syscall.SIGHUP)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// Before the engine runs (counting the dataset, waiting for a server
	// that is still loading) a signal stops at once: nothing is in flight.
	// Once it runs, engineUp hands over the drain and the two stages begin.
	interrupted := make(chan struct{})
	engineUp := make(chan func(), 1)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		close(interrupted)
		var drain func()
		select {
		case drain = <-engineUp:
		default:
		}
		if drain == nil {
			cancel(errors.New("interrupted before the run started"))
			return
		}
		drain()
		grace := time.NewTimer(cfg.Shutdown.Grace)
		defer grace.Stop()
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "stopping now: requests in flight are cancelled and will be asked again on resume")
			cancel(errors.New("second signal"))
		case <-grace.C:
			fmt.Fprintf(stderr, "stopping now: shutdown.grace (%s) is over\n", cfg.Shutdown.Grace)
			cancel(errors.New("grace period over"))
		case <-ctx.Done():
		}
	}()
	stoppedEarly := func(err error) error {
		select {
		case <-interrupted:
			return &exitError{code: exitInterrupted, err: errors.New("interrupted before the run started"),
				hint: "nothing was asked yet; run the same command to start"}
		default:
			return err
		}
	}

	dsOpts := dataset.Options{
		Path:        cfg.Dataset.Path,
		Format:      cfg.Dataset.Format,
		PromptField: cfg.Dataset.PromptField,
		IDField:     cfg.Dataset.IDField,
		Limit:       cfg.Dataset.Limit,
		OnBadRow:    cfg.Dataset.OnBadRow,
		Shard:       shard,
		NumShards:   nshards,
		OnSkip: func(e *dataset.RowError) {
			fmt.Fprintf(stderr, "skip row %s (dataset.on_bad_row: skip)\n", e)
		},
		Context: ctx, // Ctrl-C ends a Hub download; it resumes next time
	}
	if strings.HasPrefix(dsOpts.Path, "hf://") {
		dsOpts.OnDownload = downloadReporter(stderr)
		pinned, err := pinDataset(cfg.Output.Dir, dsOpts)
		if err != nil {
			return stoppedEarly(usageError(err, hubHint(err)))
		}
		if pinned != dsOpts.Path {
			fmt.Fprintf(stderr, "dataset: %s is %s\n", dsOpts.Path, pinned)
		}
		dsOpts.Path = pinned
	}
	total, err := dataset.Count(dsOpts)
	if err != nil {
		return stoppedEarly(usageError(err, "check dataset.path and dataset.format"))
	}
	stats := generator.NewStats(nil)
	stats.SetTotal(total * int64(max(cfg.Generation.N, 1)))

	// synthgen's own metrics are up from here, while the server may still be
	// loading, until the run ends; a taken address fails before any work.
	var metrics *selfMetricsServer
	if rf.metricsAddr != "" {
		metrics, err = startSelfMetrics(rf.metricsAddr, stats)
		if err != nil {
			return usageError(err, "pass a free HOST:PORT, e.g. --metrics-addr 127.0.0.1:9464, or leave it empty")
		}
		defer metrics.Close()
	}

	client := generator.NewClient(generator.ClientOptions{
		BaseURL:  cfg.Endpoint.BaseURL,
		APIKey:   cfg.APIKey(),
		Timeout:  cfg.Endpoint.Timeout,
		MaxConns: cfg.Concurrency,
	})
	model, err := resolveModel(ctx, client, cfg.Endpoint.BaseURL, cfg.Endpoint.Model, stderr)
	if err != nil {
		return stoppedEarly(err)
	}
	cfg.Endpoint.Model = model

	out, err := sink.Open(sink.Options{
		Dir:          cfg.Output.Dir,
		Format:       cfg.Output.Format,
		ShardSize:    cfg.Output.ShardSize,
		SyncInterval: cfg.Output.SyncInterval,
		RetryErrors:  rf.retryErrors,
		Force:        rf.force,
		Identity: sink.Identity{
			Version: version,
			Answer:  answerKeys(cfg, dsOpts.Path),
			Config:  cfg.Redacted(),
			Limit:   cfg.Dataset.Limit,
		},
	})
	if err != nil {
		var me *sink.MismatchError
		if errors.As(err, &me) {
			return usageError(err, "")
		}
		return fmt.Errorf("open output %s: %w", cfg.Output.Dir, err)
	}

	eng, err := generator.New(client, stats, generator.Options{
		Concurrency:  cfg.Concurrency,
		Model:        model,
		MaxTokens:    cfg.Generation.MaxTokens,
		Temperature:  cfg.Generation.Temperature,
		TopP:         cfg.Generation.TopP,
		Samples:      cfg.Generation.N,
		SystemPrompt: cfg.Generation.SystemPrompt,
		Stream:       cfg.Generation.Stream,
		Extra:        cfg.Generation.ExtraBody,
		Retry: generator.RetryPolicy{
			MaxAttempts:    cfg.Retry.MaxAttempts,
			InitialBackoff: cfg.Retry.InitialBackoff,
			MaxBackoff:     cfg.Retry.MaxBackoff,
		},
		SyncInterval: cfg.Output.SyncInterval,
	})
	if err != nil {
		_ = out.Close()
		return usageError(err, "")
	}

	src, err := dataset.Open(dsOpts)
	if err != nil {
		_ = out.Close()
		return usageError(err, "check dataset.path and dataset.format")
	}
	defer src.Close()

	fmt.Fprintf(stderr, "synthgen %s: %d prompts from %s -> %s (%s), model %s at %s, %d in flight\n",
		version, total, cfg.Dataset.Path, cfg.Output.Dir, cfg.Output.Format, model, redactURL(cfg.Endpoint.BaseURL), cfg.Concurrency)
	if n := out.DoneCount(); n > 0 {
		fmt.Fprintf(stderr, "resuming: %d records already in %s\n", n, cfg.Output.Dir)
	}
	if metrics != nil {
		fmt.Fprintf(stderr, "metrics: synthgen's own at %s\n", metrics.URL())
	}

	status := newRunStatus(cfg.Output.Dir, started, newReportConfig(cfg, rf.shard))
	if err := status.RemoveLeftovers(); err != nil {
		fmt.Fprintf(stderr, "warning: %v\n", err)
	}
	engineUp <- func() {
		status.SetState(stateDraining)
		fmt.Fprintf(stderr, "\nstopping: no new requests; waiting up to %s for the %d in flight (Ctrl-C again to stop now)\n",
			cfg.Shutdown.Grace, stats.Snapshot().InFlight)
		eng.Drain()
	}

	var scrape func(context.Context) (promscrape.Sample, error)
	if metricsURL, err := metricsURLFor(cfg); err == nil && metricsURL != "" {
		scraper := promscrape.NewScraper(metricsURL, nil)
		scrape = func(ctx context.Context) (promscrape.Sample, error) {
			s, err := scraper.Scrape(ctx)
			if err != nil {
				// The scrape error names the URL, which may carry a password.
				err = redactedError{err: err, raw: metricsURL, safe: redactURL(metricsURL)}
			}
			return s, err
		}
	}
	rep := newReporter(stdout, reporterOptions{
		TTY:      isTerminal(os.Stdout) && stdout == io.Writer(os.Stdout),
		Interval: cfg.Progress.Interval,
		Quiet:    rf.quiet,
		JSON:     rf.logFormat == "json",
		Scrape:   scrape,
		Status: func(rec progressRecord, final bool) {
			if final {
				return // Finish writes the last one, with the outcome
			}
			// A heartbeat that cannot be written is not worth stopping for.
			_ = status.Heartbeat(rec)
		},
	})
	// A second shell sees the run from its first moment, not one interval
	// (and a first scrape of the server) later.
	_ = status.Heartbeat(newProgressRecord(stats.Snapshot(), nil))
	repCtx, stopRep := context.WithCancel(context.WithoutCancel(ctx))
	repDone := make(chan struct{})
	go func() { defer close(repDone); rep.Run(repCtx, stats) }()

	sum, runErr := eng.Run(ctx, src, out)
	stats.Stop()
	stopRep()
	<-repDone
	onDisk := out.DoneCount()
	closeErr := out.Close()
	fmt.Fprint(stdout, rep.Summary(stats))

	var wasInterrupted bool
	select {
	case <-interrupted:
		// A signal that came once every key was taken (while the last
		// answers streamed, or while the sink closed) cut nothing: the job
		// is done and its exit code says so, not "rerun to resume".
		wasInterrupted = sum.Drained || sum.Canceled > 0
	default:
	}
	if sum.Duplicates > 0 {
		fmt.Fprintf(stderr, "warning: %d dataset rows repeat the id of a row this run was already asking; each (id, sample) is asked and written once (is dataset.id_field unique?)\n", sum.Duplicates)
	}
	err = runResult(cfg, runErr, closeErr, wasInterrupted, sum, onDisk, out.FailedCount(), stderr)
	final := newProgressRecord(stats.Snapshot(), rep.Server())
	if ferr := status.Finish(final, runOutcome{Err: err, Summary: sum, EndedAt: time.Now()}); ferr != nil {
		fmt.Fprintf(stderr, "warning: %v\n", ferr)
	}
	return err
}

// runResult turns how the engine and the sink ended into the error run
// returns (nil: every selected key is done), saying "nothing to do" when
// that was the case.
func runResult(cfg config.Config, runErr, closeErr error, interrupted bool, sum generator.Summary, onDisk, failed int, stderr io.Writer) error {
	if runErr != nil && closeErr != nil {
		// The run's error is the one returned; the sink's is said too, as
		// what it left (temporaries the next run recovers) matters.
		fmt.Fprintf(stderr, "warning: close output %s: %v\n", cfg.Output.Dir, closeErr)
	}
	switch {
	case runErr != nil:
		var re *dataset.RowError
		if errors.As(runErr, &re) {
			return usageError(runErr, "fix the row, or set dataset.on_bad_row: skip to skip bad rows; what was written is kept, rerun to resume")
		}
		return fmt.Errorf("%w (what was written is kept; rerun to resume)", runErr)
	case closeErr != nil:
		return fmt.Errorf("close output %s: %w", cfg.Output.Dir, closeErr)
	case interrupted:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted after %d new records", sum.Written),
			hint: "run the same command again to resume"}
	}
	if sum.Written == 0 && sum.Failed == 0 && sum.Skipped > 0 {
		switch {
		case cfg.Dataset.Limit > 0 && int64(onDisk) > sum.Skipped:
			// A limit shrunk below what an earlier run wrote: say why the
			// rest is not touched, so it does not look like lost records.
			fmt.Fprintf(stderr, "nothing to do: all %d keys selected by dataset.limit %d are done; %d records are in %s\n",
				sum.Skipped, cfg.Dataset.Limit, onDisk, cfg.Output.Dir)
		case int64(onDisk) > sum.Skipped:
			fmt.Fprintf(stderr, "nothing to do: all %d selected keys are done; %d records are in %s\n",
				sum.Skipped, onDisk, cfg.Output.Dir)
		default:
			fmt.Fprintf(stderr, "nothing to do: all %d selected keys are already in %s\n", sum.Skipped, cfg.Output.Dir)
		}
	}
	if failed > 0 {
		return &exitError{code: exitIncomplete, err: fmt.Errorf("%d requests failed for good (see %s/errors)", failed, cfg.Output.Dir),
			hint: "fix the cause, then rerun with --retry-errors to request them again"}
	}
	return nil
}

// redactedError shows err with raw replaced by safe (a URL with its
// password masked) and unwraps to err, so errors.Is still sees the cause.
type redactedError struct {
	err       error
	raw, safe string
}

func (e redactedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.raw, e.safe) }
func (e redactedError) Unwrap() error { return e.err }

// resolveModel asks the server which models it serves before anything is
// sent: the first one when want is empty, else a check that want is among
// them (a wrong name would otherwise turn every prompt into a 404 in
// DIR/errors). A server that is still loading (vLLM takes minutes for a
// large model) is waited for, with a line every 30 s, for up to 10 minutes.
// A server without GET /models (a gateway routing only chat) is taken at
// its word when want is set.
func resolveModel(ctx context.Context, client *generator.Client, baseURL, want string, stderr io.Writer) (string, error) {
	deadline := time.Now().Add(10 * time.Minute)
	// Quiet for the first seconds: a server started a moment ago (make run)
	// is not worth a line.
	lastSaid := time.Now().Add(-25 * time.Second)
	where := strings.TrimRight(redactURL(baseURL), "/") + "/models"
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		models, err := client.Models(reqCtx)
		cancel()
		if err == nil {
			switch {
			case len(models) == 0:
				return "", fmt.Errorf("%s lists no model", where)
			case want == "":
				return models[0], nil
			case slices.Contains(models, want):
				return want, nil
			}
			return "", usageError(fmt.Errorf("endpoint.model: %q is not served at %s (it serves %s)", want, where, strings.Join(models, ", ")),
				"set endpoint.model to one of them, or leave it empty to take the first")
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		ce := generator.Classify(err)
		if want != "" && (ce.Status == http.StatusNotFound || ce.Status == http.StatusMethodNotAllowed) {
			fmt.Fprintf(stderr, "note: %s answers %d; going on with endpoint.model %q\n", where, ce.Status, want)
			return want, nil
		}
		if !ce.Retryable || time.Now().After(deadline) {
			hint := "is the server running? check endpoint.base_url (it ends in /v1)"
			if ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden {
				hint = "the server wants an API key: put it in the environment variable named by endpoint.api_key_env (default OPENAI_API_KEY)"
			}
			return "", &exitError{code: exitFailure, err: fmt.Errorf("list models at %s: %w", where, redactedError{err: err, raw: baseURL, safe: redactURL(baseURL)}), hint: hint}
		}
		if time.Since(lastSaid) > 30*time.Second {
			fmt.Fprintf(stderr, "waiting for the server at %s (%v)\n", redactURL(baseURL), redactedError{err: err, raw: baseURL, safe: redactURL(baseURL)})
			lastSaid = time.Now()
		}
		if !sleepCtx(ctx, 2*time.Second) {
			return "", ctx.Err()
		}
	}
}

// answerKeys are the settings that change the answers, for the manifest's
// hash. A Hub dataset adds the commit its rows came from: a branch that
// moved is another dataset.
func answerKeys(cfg config.Config, datasetPath string) map[string]string {
	keys := cfg.AnswerKeys()
	if datasetPath != cfg.Dataset.Path {
		keys["dataset.identity"] = datasetPath
	}
	return keys
}

// pinDataset resolves an hf:// path to the commit to read. A resume of a
// directory that already read this path reads the commit it read then (no
// network, the same ids); a new job takes what the branch points at now.
func pinDataset(dir string, opts dataset.Options) (string, error) {
	if m, err := sink.ReadManifest(dir); err == nil {
		if m.Identity.Answer["dataset.path"] == opts.Path {
			if id := m.Identity.Answer["dataset.identity"]; id != "" {
				return id, nil
			}
		}
	}
	return dataset.Identity(opts)
}

func hubHint(err error) string {
	switch {
	case errors.Is(err, dataset.ErrHubAccess):
		return "a gated or private dataset needs a token: export HF_TOKEN=..."
	case errors.Is(err, dataset.ErrHubUnreachable):
		return "no route to the Hub from here? download the files elsewhere and point dataset.path at them (or set HF_ENDPOINT to a mirror)"
	case errors.Is(err, dataset.ErrHubNotFound):
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

// sleepCtx waits d or until ctx ends; it reports whether the wait completed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func metricsURLFor(cfg config.Config) (string, error) {
	if cfg.Endpoint.MetricsURL != "" {
		return cfg.Endpoint.MetricsURL, nil
	}
	return promscrape.MetricsURL(cfg.Endpoint.BaseURL)
}

// parseShard parses --shard "i/n".
func parseShard(s string) (int, int, error) {
	if s == "" {
		return 0, 1, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard: %q is not i/n with 0 <= i < n (e.g. 0/4)", s)
	}
	return i, n, nil
}
