package promscrape

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestSharedScrapesOnceForEveryReader: readers within maxAge of a scrape
// share it, sample or error; the first reader after it scrapes again.
func TestSharedScrapesOnceForEveryReader(t *testing.T) {
	calls := 0
	fail := false
	c := NewShared(func(context.Context) (Sample, error) {
		calls++
		if fail {
			return Sample{}, errors.New("503 Service Unavailable")
		}
		return Sample{At: time.Unix(int64(calls), 0), GenerationTokens: float64(100 * calls)}, nil
	}, 2*time.Second)
	clock := time.Unix(1000, 0)
	c.now = func() time.Time { return clock }
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 5 { // auto, the progress line, status.json, ... at once
		wg.Go(func() {
			if s, err := c.Scrape(ctx); err != nil || s.GenerationTokens != 100 {
				t.Errorf("reader: %+v, %v; want the one scrape's sample", s, err)
			}
		})
	}
	wg.Wait()
	if calls != 1 {
		t.Fatalf("%d scrapes for five readers within maxAge, want 1", calls)
	}
	clock = clock.Add(2 * time.Second)
	fail = true
	if _, err := c.Scrape(ctx); err == nil {
		t.Fatal("after maxAge: the old sample again, want a new scrape (which fails)")
	}
	if _, err := c.Scrape(ctx); err == nil || calls != 2 {
		t.Fatalf("a reader right after a failed scrape: %v after %d scrapes; want the same error, shared", err, calls)
	}
}

// TestSharedKeepsNoCanceledScrape: a scrape cut because its reader's
// context ended is not what the next reader gets.
func TestSharedKeepsNoCanceledScrape(t *testing.T) {
	calls := 0
	c := NewShared(func(ctx context.Context) (Sample, error) {
		calls++
		if err := ctx.Err(); err != nil {
			return Sample{}, err
		}
		return Sample{At: time.Unix(1, 0)}, nil
	}, time.Hour)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Scrape(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled reader: %v", err)
	}
	if _, err := c.Scrape(context.Background()); err != nil || calls != 2 {
		t.Fatalf("next reader: %v after %d scrapes, want a fresh scrape", err, calls)
	}
}
