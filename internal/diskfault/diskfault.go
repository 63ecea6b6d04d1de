// Package diskfault lets tests make the sink's file writes fail the way a
// full or failing disk does (ENOSPC, EIO), in-process and without root: the
// sink asks Check before each write and fsync of a shard. With no fault set
// (always, outside tests) Check is one atomic load.
package diskfault

import "sync/atomic"

// Fault decides whether the op ("write" or "fsync") on path fails; nil
// lets it through.
type Fault func(op, path string) error

var current atomic.Pointer[Fault]

// Set makes f decide every later Check until the returned restore is
// called (a test calls it in Cleanup). Tests that set a fault must not run
// in parallel with other sink writers.
func Set(f Fault) (restore func()) {
	prev := current.Swap(&f)
	return func() { current.Store(prev) }
}

// Check is the injected error for op on path, nil when there is none.
func Check(op, path string) error {
	f := current.Load()
	if f == nil || *f == nil {
		return nil
	}
	return (*f)(op, path)
}
