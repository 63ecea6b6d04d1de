package main

// synthgen watch over several replicas of one model: their sum, and with
// --each every server's own line.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// watchServer is one server watch reads: its /metrics and its last sample.
type watchServer struct {
	url     string // passwords masked, for lines and errors
	scraper *promscrape.Scraper
	prev    *promscrape.Sample
	failing bool
}

func runWatchMany(ctx context.Context, stdout, stderr io.Writer, targets []string, o watchOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	servers := make([]*watchServer, len(targets))
	for i, t := range targets {
		url, err := promscrape.MetricsURL(watchTarget(t))
		if err != nil {
			return usageError(fmt.Errorf("URL %d: %w", i+1, err), "pass each server's root (http://host:8000), its /v1 base or its /metrics URL")
		}
		servers[i] = &watchServer{url: wire.RedactURL(url), scraper: promscrape.NewScraper(url, nil)}
	}
	for _, sv := range servers {
		s, err := sv.scraper.Scrape(ctx)
		if err != nil {
			return watchScrapeError(wire.RedactURLIn(err, sv.scraper.URL()))
		}
		sv.prev = &s
	}
	wait := o.window
	for {
		if !backoff.Sleep(ctx, wait) {
			if o.follow {
				return nil // Ctrl-C is how --follow ends
			}
			return ctx.Err()
		}
		wait = o.interval
		var each []promscrape.Rates
		var read []*watchServer
		for _, sv := range servers {
			cur, err := sv.scraper.Scrape(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				if o.follow {
					return nil
				}
				return ctx.Err()
			case err != nil && !o.follow:
				return watchScrapeError(wire.RedactURLIn(err, sv.scraper.URL()))
			case err != nil:
				// A replica restarting under --follow: said once, the
				// others' sum goes on.
				if !sv.failing {
					fmt.Fprintf(stderr, "%v (retrying every %s)\n", wire.RedactURLIn(err, sv.scraper.URL()), o.interval)
					sv.failing = true
				}
				continue
			}
			if sv.failing {
				fmt.Fprintf(stderr, "%s answers again\n", sv.url)
				sv.failing = false
			}
			if sv.prev != nil {
				each = append(each, promscrape.Between(*sv.prev, cur))
				read = append(read, sv)
			}
			sv.prev = &cur
		}
		if len(each) > 0 {
			if err := printWatchMany(stdout, servers, read, each, o); err != nil {
				return err
			}
		}
		if !o.follow {
			return nil
		}
	}
}

// printWatchMany writes the sum of the servers read (of all) and, with
// --each, each one's rates.
func printWatchMany(stdout io.Writer, all, read []*watchServer, each []promscrape.Rates, o watchOptions) error {
	sum := sumRates(each)
	now := time.Now().UTC().Format(time.RFC3339)
	if !o.json {
		fmt.Fprintf(stdout, "%s (%s window, %d/%d servers)\n", formatServer(sum), fmtDuration(sum.Window), len(read), len(all))
		if o.each {
			for i, sv := range read {
				fmt.Fprintf(stdout, "  %s: %s\n", sv.url, formatServer(each[i]))
			}
		}
		return nil
	}
	urls := make([]string, len(read))
	for i, sv := range read {
		urls[i] = sv.url
	}
	rec := generator.NewServerRecord(sum)
	rec.URL, rec.Time = strings.Join(urls, ","), now
	recs := []*generator.ServerRecord{rec}
	if o.each {
		for i, sv := range read {
			r := generator.NewServerRecord(each[i])
			r.URL, r.Time = sv.url, now
			recs = append(recs, r)
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
