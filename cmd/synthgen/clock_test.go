package main

import (
	"sync"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
)

// testClock is the clock given to runstats.Stats so that the figures a
// test reads are known exactly (internal/progress's tests have their own).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rampStats is a 200-request ramp at 6000 tok/s, none finished after 5 s.
func rampStats() (*runstats.Stats, *testClock) {
	clk := &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	stats := runstats.NewStats(clk.now)
	stats.SetTotal(25000)
	trs := make([]*runstats.Tracker, 200)
	for i := range trs {
		trs[i] = stats.Begin()
	}
	for range 5 {
		for _, tr := range trs {
			tr.Delta(30)
		}
		clk.advance(time.Second)
	}
	return stats, clk
}
