package sink

import "github.com/synthgen/synthgen/internal/durable"

// disk writes through package durable with every step reported to step, so
// that the crash tests see (and can stop at) the steps durable takes too.
var disk = durable.Hook(step)

// stepHook, when a test sets it, runs before every step that changes the
// disk or makes a change durable (create, write, fsync, rename, remove,
// truncate, directory fsync). The crash tests panic in it to stop the
// process between any two such steps, as kill -9 would, and record the
// order of the steps to check what power loss could reorder.
var stepHook func(op, path string)

func step(op, path string) {
	if stepHook != nil {
		stepHook(op, path)
	}
}
