package promscrape

import (
	"context"
	"sync"
	"time"
)

// Shared is one server's /metrics scrape shared by every reader of a run's
// server view (concurrency: auto, the progress line and status.json): a
// reader gets the latest sample while it is younger than maxAge, and only a
// reader that finds it older scrapes again, so the server is asked once
// however many read it. Readers at the same moment wait for one scrape.
type Shared struct {
	scrape func(context.Context) (Sample, error)
	maxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	have bool
	at   time.Time // when the kept result was scraped
	s    Sample
	err  error
}

// NewShared shares scrape's results for maxAge each.
func NewShared(scrape func(context.Context) (Sample, error), maxAge time.Duration) *Shared {
	return &Shared{scrape: scrape, maxAge: maxAge, now: time.Now}
}

// Scrape is the latest sample (or error) while younger than maxAge, else
// a new scrape's. A scrape cut by ctx is not kept.
func (c *Shared) Scrape(ctx context.Context) (Sample, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && c.now().Sub(c.at) < c.maxAge {
		return c.s, c.err
	}
	s, err := c.scrape(ctx)
	if err != nil && ctx.Err() != nil {
		return s, err
	}
	c.have, c.at, c.s, c.err = true, c.now(), s, err
	return s, err
}
