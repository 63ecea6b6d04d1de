package main

// Several endpoints (endpoint.base_url a list): the server's view summed
// over every replica's /metrics.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/internal/redact"
)

// metricsURLs are the /metrics URLs of the endpoints, in base_url order:
// endpoint.metrics_url's entries (one per base_url, which config checks),
// else each derived from its base_url.
func metricsURLs(cfg config.Config) ([]string, error) {
	if m := cfg.Endpoint.MetricsURLs(); len(m) > 0 {
		return m, nil
	}
	bases := cfg.Endpoint.BaseURLs()
	out := make([]string, len(bases))
	for i, b := range bases {
		u, err := promscrape.MetricsURL(b)
		if err != nil {
			return nil, fmt.Errorf("endpoint.base_url %s: %w", redact.URL(b), err)
		}
		out[i] = u
	}
	return out, nil
}

// serverMetrics are the endpoints' own /metrics, one scrape each with its
// URL (password masked), in base_url order; none when the config gives no
// URL for them.
func serverMetrics(cfg config.Config) []autoconc.Endpoint {
	urls, err := metricsURLs(cfg)
	if err != nil {
		return nil
	}
	var hc *http.Client
	if tlsConfig, err := wire.ClientTLS(cfg.Endpoint.CAFile, cfg.Endpoint.InsecureSkipVerify); err == nil && tlsConfig != nil {
		// The server's private CA signs its /metrics too.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsConfig
		hc = &http.Client{Timeout: promscrape.DefaultTimeout, Transport: tr}
	}
	out := make([]autoconc.Endpoint, 0, len(urls))
	for _, u := range urls {
		if u == "" {
			return nil
		}
		scraper := promscrape.NewScraper(u, hc)
		async := &asyncScrape{scrape: func(ctx context.Context) (promscrape.Sample, error) {
			s, err := scraper.Scrape(ctx)
			if err != nil {
				// The scrape error names the URL, which may carry a password.
				err = redact.URLIn(err, u)
			}
			return s, err
		}}
		out = append(out, autoconc.Endpoint{URL: redact.URL(u), Scrape: async.Scrape})
	}
	return out
}

// scrapeWait is how long a reader waits for a scrape under way before it
// takes the latest result instead: a /metrics that hangs (up to
// promscrape.DefaultTimeout) never holds the progress line, which read
// every replica's in turn and came every 4 s, two at once.
const scrapeWait = 100 * time.Millisecond

// asyncScrape runs one server's scrapes in the background, one at a time:
// a reader starts one when none is under way and waits for it at most
// scrapeWait, then has the latest result, which a stale sample's At tells.
// Only the first, before any result, is waited for whole (its own bound,
// promscrape.DefaultTimeout): there is nothing else to give.
type asyncScrape struct {
	scrape func(context.Context) (promscrape.Sample, error)

	mu   sync.Mutex
	done chan struct{} // the scrape under way's, closed when it ends; nil: none
	have bool
	s    promscrape.Sample
	err  error
}

// Scrape is the latest result once the scrape it starts or finds under way
// ended, or scrapeWait passed, or ctx ended.
func (a *asyncScrape) Scrape(ctx context.Context) (promscrape.Sample, error) {
	a.mu.Lock()
	if a.done == nil {
		done := make(chan struct{})
		a.done = done
		// Not the reader's context: the scrape outlives a reader that
		// stopped waiting, and its result is the next reader's.
		go func() {
			s, err := a.scrape(context.WithoutCancel(ctx))
			a.mu.Lock()
			a.have, a.s, a.err, a.done = true, s, err, nil
			a.mu.Unlock()
			close(done)
		}()
	}
	done, have := a.done, a.have
	a.mu.Unlock()
	var bound <-chan time.Time
	if have {
		t := time.NewTimer(scrapeWait)
		defer t.Stop()
		bound = t.C
	}
	select {
	case <-done:
	case <-bound:
	case <-ctx.Done():
		return promscrape.Sample{}, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s, a.err
}
