//go:build unix

package main

import (
	"os/signal"
	"syscall"
)

// ignoreBrokenPipe keeps a closed stdout or stderr (`synthgen run ... |
// head -1`, a log reader that went away) from killing the run with
// SIGPIPE halfway through, with no drain and no report.json: a write to
// it fails instead, and the job goes on to its end, its records and
// status files unaffected.
func ignoreBrokenPipe() { signal.Ignore(syscall.SIGPIPE) }
