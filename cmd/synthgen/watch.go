package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/human"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/internal/redact"
	"github.com/synthgen/synthgen/ui/progress"
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
		Short: "Show a server's own throughput (generated tok/s, running, waiting, KV cache) from its /metrics: vLLM, SGLang or llama.cpp",
		Long: `watch reads the server's Prometheus /metrics twice, --window apart, and prints
one line: the tokens the server generated per second over the window, then the
requests running and waiting, the KV-cache usage, the preemptions during the
window and, when speculative decoding is on, the draft acceptance rate and the
mean acceptance length (tokens per forward pass of the target model).

It reads vLLM's metrics (vllm:*), SGLang's (sglang:*, served when SGLang is
started with --enable-metrics) and llama.cpp's (llamacpp:*, served when
llama-server is started with --metrics), and shows what the server reports:
llama.cpp has no preemption counter, and its newer versions no KV-cache gauge.
SGLang and llama.cpp count a request's tokens when it ends, so their tok/s
moves in steps.

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
			return runWatch(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), targets, o)
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

// runWatch watches the servers at targets: one server is the list of one,
// so that both read, retry and redact alike.
func runWatch(ctx context.Context, stdout, stderr io.Writer, targets []string, o watchOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	servers, err := watchServers(targets)
	if err != nil {
		return err
	}
	return watchLoop(ctx, stdout, stderr, servers, o)
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

// watchServer is one server watch reads: its /metrics and its last sample.
type watchServer struct {
	url     string // password masked: the only form lines and errors show
	scraper *promscrape.Scraper
	prev    promscrape.Sample
	health  promscrape.Health
	told    bool // what its metrics lack was said
}

// tellLacks says once, on stderr, which figures the server's kind does not
// report (llama.cpp: no preemptions), so that their absence from the line
// is no surprise.
func (sv *watchServer) tellLacks(stderr io.Writer, s promscrape.Sample) {
	if sv.told {
		return
	}
	sv.told = true
	if lacks := s.Lacks(); len(lacks) > 0 && s.Kind.Known() {
		fmt.Fprintf(stderr, "%s is %s, whose /metrics has no %s: the line leaves them out\n",
			sv.url, s.Kind.Name(), strings.Join(lacks, " nor "))
	}
}

// redact is err with the server's URL shown as url shows it: the scrape
// errors name the URL scraped, password and all.
func (sv *watchServer) redact(err error) error { return redact.URLIn(err, sv.scraper.URL()) }

// watchServers is the /metrics of each target, or the usage error of the
// first that has none.
func watchServers(targets []string) ([]*watchServer, error) {
	servers := make([]*watchServer, len(targets))
	for i, t := range targets {
		t = watchTarget(t)
		url, err := promscrape.MetricsURL(t)
		if err != nil {
			// The error quotes the URL as typed, password and all.
			err = redact.URLIn(err, t)
			if len(targets) == 1 {
				return nil, usageError(err, "pass the server root (http://host:8000), its /v1 base or its /metrics URL")
			}
			return nil, usageError(fmt.Errorf("URL %d: %w", i+1, err), "pass each server's root (http://host:8000), its /v1 base or its /metrics URL")
		}
		servers[i] = &watchServer{url: redact.URL(url), scraper: promscrape.NewScraper(url, nil)}
	}
	return servers, nil
}

// watchLoop scrapes the servers every interval (the first window after one
// scrape) and prints their rates, once or, with --follow, until Ctrl-C.
func watchLoop(ctx context.Context, stdout, stderr io.Writer, servers []*watchServer, o watchOptions) error {
	// A scrape whose failure ends the watch (the first, and each without
	// --follow) is tried again while it times out; under --follow the next
	// interval tries again anyway.
	scrape := func(sv *watchServer, ends bool) (promscrape.Sample, error) {
		if ends {
			return promscrape.Persist(ctx, sv.scraper.Scrape)
		}
		return sv.scraper.Scrape(ctx)
	}
	for _, sv := range servers {
		s, err := scrape(sv, true)
		if err != nil {
			return watchScrapeError(sv.redact(err))
		}
		sv.tellLacks(stderr, s)
		sv.prev = s
	}
	wait := o.window
	for {
		if !backoff.Sleep(ctx, wait) {
			return o.stopped(ctx)
		}
		wait = o.interval
		var read []watchRead
		for _, sv := range servers {
			cur, err := scrape(sv, !o.follow)
			switch {
			case err != nil && ctx.Err() != nil:
				return o.stopped(ctx)
			case err != nil && !o.follow:
				return watchScrapeError(sv.redact(err))
			case err != nil:
				// A server restarting under --follow: said once, kept
				// trying; the others' lines go on meanwhile.
				if sv.health.Failed() {
					fmt.Fprintf(stderr, "%v (retrying every %s)\n", sv.redact(err), o.interval)
				}
				continue
			}
			if sv.health.Answered() {
				fmt.Fprintf(stderr, "%s answers again\n", sv.url)
			}
			// The window runs from this server's last answered scrape,
			// across its outage if it had one.
			read = append(read, watchRead{url: sv.url, rates: promscrape.Between(sv.prev, cur), at: cur.At})
			sv.prev = cur
		}
		if len(read) > 0 {
			if err := printWatch(stdout, read, len(servers), o); err != nil {
				return err
			}
		}
		if !o.follow {
			return nil
		}
	}
}

// stopped is what watch ends with once ctx is done: nothing under --follow,
// which only Ctrl-C ends, the context's error otherwise.
func (o watchOptions) stopped(ctx context.Context) error {
	if o.follow {
		return nil
	}
	return ctx.Err()
}

// watchRead is one server's rates over the window that just ended.
type watchRead struct {
	url   string // password masked
	rates promscrape.Rates
	at    time.Time // when the window ended
}

// printWatch writes the rates of the servers read, out of all watched, as
// lines or JSON objects: one server's own, naming it; with several their
// sum, how many of them it counts and, with --each, each one's after it.
func printWatch(stdout io.Writer, read []watchRead, all int, o watchOptions) error {
	each := make([]promscrape.Rates, len(read))
	urls := make([]string, len(read))
	var at time.Time
	for i, r := range read {
		each[i], urls[i] = r.rates, r.url
		if r.at.After(at) {
			at = r.at
		}
	}
	sum := promscrape.Sum(each)
	several := all > 1
	if !o.json {
		if !several {
			fmt.Fprintf(stdout, "%s (%s window, %s)\n", progress.ServerText(sum), human.Duration(sum.Window), urls[0])
			return nil
		}
		fmt.Fprintf(stdout, "%s (%s window, %d/%d servers)\n", progress.ServerText(sum), human.Duration(sum.Window), len(read), all)
		if o.each {
			for _, r := range read {
				fmt.Fprintf(stdout, "  %s: %s\n", r.url, progress.ServerText(r.rates))
			}
		}
		return nil
	}
	// The time is the last scrape's: what the figures are as of.
	now := at.UTC().Format(time.RFC3339)
	rec := runstats.NewServerRecord(sum)
	rec.URL, rec.Time = strings.Join(urls, ","), now
	recs := []*runstats.ServerRecord{rec}
	if several && o.each {
		for _, r := range read {
			e := runstats.NewServerRecord(r.rates)
			e.URL, e.Time = r.url, now
			recs = append(recs, e)
		}
	}
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return nil
}

// watchScrapeError tells the person what to check: a /metrics of no kind
// read, one that is off (llama-server without --metrics answers 501 and
// says so, SGLang without --enable-metrics has none), or a server that is
// not there.
func watchScrapeError(err error) error {
	var se *promscrape.StatusError
	switch {
	case errors.Is(err, promscrape.ErrNoServerMetrics):
		return &exitError{code: exitFailure, err: err,
			hint: "the URL answers but serves none of vLLM's, SGLang's or llama.cpp's metrics: pass the server root (http://host:8000) or its /metrics URL"}
	case errors.As(err, &se) && se.Status == http.StatusNotImplemented:
		return &exitError{code: exitFailure, err: err,
			hint: "the server's /metrics is off: llama-server serves it only when started with --metrics"}
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		return &exitError{code: exitFailure, err: err,
			hint: "no /metrics there: vLLM serves it at the server root, SGLang only when started with --enable-metrics, llama-server only with --metrics; or pass the /metrics URL"}
	}
	return &exitError{code: exitFailure, err: err,
		hint: "is the server running? pass the server root (http://host:8000) or its /metrics URL"}
}
