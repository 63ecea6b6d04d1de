package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Developer's hook (ARCHITECTURE.md "The benchmark harness"): with
// SYNTHGEN_CPUPROFILE=path the whole command runs under the CPU profiler,
// with SYNTHGEN_MEMPROFILE=path a heap profile is written when it returns.
// Read either with `go tool pprof bin/synthgen path`.
const (
	cpuProfileEnv = "SYNTHGEN_CPUPROFILE"
	memProfileEnv = "SYNTHGEN_MEMPROFILE"
)

// The hook's variables are read, so `run` does not warn that they name no
// config key (run.go's otherEnv).
func init() { otherEnv = append(otherEnv, cpuProfileEnv, memProfileEnv) }

// profiled runs cmd under the profilers the environment asks for. A profile
// that cannot be started or written is reported on stderr and does not fail
// the command: the hook must never change what a run does.
func profiled(cmd func() error) error {
	if path := os.Getenv(cpuProfileEnv); path != "" {
		if f, err := os.Create(path); err != nil {
			fmt.Fprintf(os.Stderr, "synthgen: %s=%s: %v (running without the CPU profile)\n", cpuProfileEnv, path, err)
		} else if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "synthgen: %s=%s: %v (running without the CPU profile)\n", cpuProfileEnv, path, err)
			f.Close()
		} else {
			defer func() {
				pprof.StopCPUProfile()
				if err := f.Close(); err != nil {
					fmt.Fprintf(os.Stderr, "synthgen: %s=%s: %v\n", cpuProfileEnv, path, err)
				}
			}()
		}
	}
	if path := os.Getenv(memProfileEnv); path != "" {
		defer writeHeapProfile(path)
	}
	return cmd()
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "synthgen: %s=%s: %v\n", memProfileEnv, path, err)
		return
	}
	runtime.GC() // the profile shows what is live at the end, not garbage
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "synthgen: %s=%s: %v\n", memProfileEnv, path, err)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "synthgen: %s=%s: %v\n", memProfileEnv, path, err)
	}
}
