package main

// Several endpoints (endpoint.base_url a list): the server's view summed
// over every replica's /metrics.

import (
	"context"
	"fmt"
	"net/http"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
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
			return nil, fmt.Errorf("endpoint.base_url %s: %w", wire.RedactURL(b), err)
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
		out = append(out, autoconc.Endpoint{URL: wire.RedactURL(u), Scrape: func(ctx context.Context) (promscrape.Sample, error) {
			s, err := scraper.Scrape(ctx)
			if err != nil {
				// The scrape error names the URL, which may carry a password.
				err = wire.RedactURLIn(err, u)
			}
			return s, err
		}})
	}
	return out
}
