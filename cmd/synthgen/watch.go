package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/promscrape"
)

type watchOptions struct {
	window   time.Duration
	interval time.Duration
	follow   bool
	json     bool
	each     bool // several servers: each one's line after their sum
}

func newWatchCmd() *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch URL [URL...]",
		Short: "Show a vLLM server's own throughput (generated tok/s, running, waiting, KV cache) from its /metrics",
		Long: `watch reads the server's Prometheus /metrics twice, --window apart, and prints
one line: the tokens the server generated per second over the window, then the
requests running and waiting, the KV-cache usage, the preemptions during the
window and, when speculative decoding is on, the draft acceptance rate and the
mean acceptance length (tokens per forward pass of the target model).

It counts every client of the server, not only synthgen: use it to see whether
the GPU is busy before starting a job, or from another terminal while one runs.

URL is the server root (http://host:8000), its OpenAI base (http://host:8000/v1)
or the /metrics URL itself; a bare host:port means http://host:port. With --follow it prints a line every --interval
until Ctrl-C.

Several URLs (or one argument with URLs comma-separated, as endpoint.base_url
takes them) are replicas of one model: the line is their sum (tokens, running,
waiting and preemptions add up, the KV-cache usage is their mean); --each
prints each server's line after it.`,
		Example: `  synthgen watch http://localhost:8000
  synthgen watch http://gpu-box:8000/v1 --window 30s
  synthgen watch http://gpu-box:8000/metrics --follow --interval 5s
  synthgen watch http://localhost:8000 --json | jq .gen_tok_per_s
  synthgen watch http://gpu-01:8000,http://gpu-01:8001 --each`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(fmt.Errorf("watch takes one URL or more, got %d arguments", len(args)),
					"e.g. synthgen watch http://localhost:8000 (the server root, its /v1 base or its /metrics URL)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var targets []string
			for _, a := range args {
				targets = append(targets, strings.Split(a, ",")...)
			}
			if len(targets) == 1 {
				return runWatch(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), targets[0], o)
			}
			return runWatchMany(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), targets, o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.window, "window", 10*time.Second, "time between the two scrapes a rate is computed from")
	f.DurationVar(&o.interval, "interval", 0, "with --follow, time between lines (default: --window)")
	f.BoolVar(&o.follow, "follow", false, "print a line every --interval until Ctrl-C")
	f.BoolVar(&o.json, "json", false, "print one JSON object per line instead of text")
	f.BoolVar(&o.each, "each", false, "with several URLs, print each server's line (or JSON object) after their sum")
	return cmd
}

// watchTarget takes a bare host:port (127.0.0.1:8000, gpu-box:8000/v1) as
// http://host:port, as people type it; Go's URL parser would refuse it
// ("first path segment in URL cannot contain colon") or read the host as
// a scheme.
func watchTarget(target string) string {
	t := strings.TrimSpace(target)
	if t != "" && !strings.Contains(t, "://") {
		return "http://" + t
	}
	return t
}

func runWatch(ctx context.Context, stdout, stderr io.Writer, target string, o watchOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	return watchLoop(ctx, stderr, stdout, target, o)
}

// check validates the options and fills --interval's default.
func (o *watchOptions) check() error {
	if o.window <= 0 {
		return usageError(fmt.Errorf("--window %s: must be positive", o.window), "e.g. --window 10s")
	}
	if o.interval < 0 {
		return usageError(fmt.Errorf("--interval %s: must not be negative (0: --window)", o.interval), "e.g. --interval 5s")
	}
	if o.interval == 0 {
		o.interval = o.window
	}
	return nil
}

// watchLoop scrapes the server every interval (the first window after one
// scrape) and prints its rates, once or, with --follow, until Ctrl-C.
func watchLoop(ctx context.Context, stderr, stdout io.Writer, target string, o watchOptions) error {
	url, err := promscrape.MetricsURL(watchTarget(target))
	if err != nil {
		return usageError(err, "pass the server root (http://host:8000), its /v1 base or its /metrics URL")
	}
	scraper := promscrape.NewScraper(url, nil)

	prev, err := scraper.Scrape(ctx)
	if err != nil {
		return watchScrapeError(err)
	}
	wait := o.window
	failing := false
	for {
		if !backoff.Sleep(ctx, wait) {
			if o.follow {
				return nil // Ctrl-C is how --follow ends
			}
			return ctx.Err()
		}
		wait = o.interval
		cur, err := scraper.Scrape(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			if o.follow {
				return nil
			}
			return ctx.Err()
		case err != nil && !o.follow:
			return watchScrapeError(err)
		case err != nil:
			// A server restarting under --follow: say it once, keep trying.
			if !failing {
				fmt.Fprintf(stderr, "%v (retrying every %s)\n", err, o.interval)
				failing = true
			}
			continue
		}
		if failing {
			fmt.Fprintf(stderr, "%s answers again\n", url)
			failing = false
		}
		if err := printWatch(stdout, url, prev, cur, o.json); err != nil {
			return err
		}
		prev = cur
		if !o.follow {
			return nil
		}
	}
}

// printWatch writes the server's rates between two scrapes, as a line or
// as a JSON object.
func printWatch(stdout io.Writer, url string, prev, cur promscrape.Sample, asJSON bool) error {
	rates := promscrape.Between(prev, cur)
	if !asJSON {
		fmt.Fprintf(stdout, "%s (%s window, %s)\n", formatServer(rates), fmtDuration(rates.Window), url)
		return nil
	}
	rec := generator.NewServerRecord(rates)
	rec.URL, rec.Time = url, cur.At.UTC().Format(time.RFC3339)
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return nil
}

// watchScrapeError tells the person what to check.
func watchScrapeError(err error) error {
	if errors.Is(err, promscrape.ErrNoVLLMMetrics) {
		return &exitError{code: exitFailure, err: err,
			hint: "the URL answers but is not a vLLM /metrics: pass the vLLM server root (http://host:8000) or its /metrics URL"}
	}
	return &exitError{code: exitFailure, err: err,
		hint: "is vLLM running? pass the server root (http://host:8000) or its /metrics URL"}
}
