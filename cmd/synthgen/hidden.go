package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/hidden"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
)

// hiddenConfig is the pass's view of the configuration: the extraction
// server is hidden_states.base_url, or the first generation endpoint.
func hiddenConfig(cfg config.Config) hidden.Config {
	// The generation endpoint's key goes to it alone: an extraction server
	// of its own (a local vLLM) is sent none.
	base, key := cfg.Hidden.BaseURL, ""
	if base == "" {
		if urls := cfg.Endpoint.BaseURLs(); len(urls) > 0 {
			base, key = urls[0], cfg.APIKey()
		}
	}
	return hidden.Config{
		BaseURL: base, APIKey: key, Model: cfg.Endpoint.Model,
		Dir: cfg.Hidden.Dir, Layers: cfg.Hidden.Layers, HiddenSize: cfg.Hidden.HiddenSize,
		LockWait: cfg.Hidden.LockWait, Attempts: cfg.Retry.MaxAttempts, Workers: min(max(cfg.Concurrency, 1), 64),
		HTTP: &http.Client{Timeout: cfg.Endpoint.Timeout},
	}
}

// runHidden is the hidden-state pass after a run that ended with runErr
// (nil, or its failed keys): every record of output.dir with token ids,
// its states kept once under DIR/hidden. status.json follows the pass
// (status), and report.json gets its figures and the whole command's
// outcome at its end, which it returns: a unit that failed every attempt
// makes it non-zero (a later run asks it again), and a signal drains the
// pass as it drains the run, with the run's interrupted exit code.
func (rs *runSession) runHidden(status *runfiles.StatusWriter, runErr error) error {
	cfg, notes := rs.cfg, rs.notes()
	hc := hiddenConfig(cfg)
	fmt.Fprintf(notes, "hidden states: %s a token (%d layers × %d, bf16, and its id); extracting from %s into %s/%s\n",
		humanize.IBytes(uint64(hidden.BytesPerToken(hc.Layers, hc.HiddenSize))), hc.Layers, hc.HiddenSize, hc.BaseURL, cfg.Output.Dir, hidden.DirName)
	fig := &hiddenFigures{}
	fig.setState(runfiles.StateRunning)
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	rs.sd.arm(func() {
		fmt.Fprintf(rs.stderr, "\nstopping the hidden-state pass: no new extraction; waiting up to %s for those in flight (Ctrl-C again to stop now)\n", cfg.Shutdown.Grace)
		fig.setState(runfiles.StateDraining)
		halt()
	})
	if rs.sd.interrupted() {
		halt() // the signal came between the run's end and the arm above
	}
	writeStatus := func() {
		if err := status.Hidden(fig.record()); err != nil {
			fmt.Fprintf(rs.stderr, "warning: hidden states: %v\n", err)
		}
	}
	writeStatus()
	stopTicks := hiddenProgress(notes, cfg.Progress.Interval, fig, writeStatus)
	res, err := hidden.Run(rs.sd.ctx, cfg.Output.Dir, hc, hidden.Hooks{
		Start: func(r hidden.Result) {
			fig.start(r)
			fmt.Fprintf(notes, "hidden states: %d units, %d kept before; %s projected for the rest\n", r.Units, r.Skipped, humanize.IBytes(uint64(r.Projected)))
		},
		Kept:   func(e hidden.Entry) { fig.kept.Add(1); fig.bytes.Add(e.Bytes) },
		Failed: func(hidden.Failure) { fig.failed.Add(1) },
		Error:  func(hidden.Unit, error) { fig.errors.Add(1) },
		Stop:   stop,
	})
	stopTicks()
	fig.end(res)
	fmt.Fprintf(notes, "hidden states: %d units, %d kept now, %d kept before, %d failed; projected %s at start, %s kept (%d bytes)\n",
		res.Units, res.Kept, res.Skipped, len(res.Failed), humanize.IBytes(uint64(res.Projected)), humanize.IBytes(uint64(res.Bytes)), res.Bytes)
	state, final := rs.hiddenVerdict(res, err, runErr)
	fig.setState(state)
	runState := state // the run's own state stands unless the pass stopped early
	if state == runfiles.StateDone {
		runState = ""
	}
	if ferr := status.FinishHidden(fig.record(), runState, runExitCode(final), final); ferr != nil {
		fmt.Fprintf(rs.stderr, "warning: hidden states: %v\n", ferr)
	}
	return final
}

// hiddenVerdict is the pass's final state and the command's error: an
// interrupted pass wins (its exit code says "run again"), then a broken
// one, then the run's own verdict, then units that failed every attempt.
func (rs *runSession) hiddenVerdict(res hidden.Result, err, runErr error) (runfiles.State, error) {
	cfg := rs.cfg
	switch {
	case err != nil && rs.sd.interrupted():
		if runErr != nil {
			fmt.Fprintf(rs.stderr, "%v\n", runErr)
		}
		return runfiles.StateInterrupted, &exitError{code: exitInterrupted, asked: true,
			err: fmt.Errorf("hidden states: interrupted: %d units kept now, %d left; run the same command to extract them (no kept unit is asked again)",
				res.Kept, res.Units-res.Skipped-res.Kept-len(res.Failed))}
	case err != nil:
		if runErr != nil {
			fmt.Fprintf(rs.stderr, "%v\n", runErr)
		}
		return runfiles.StateFailed, err
	}
	var herr error
	if n := len(res.Failed); n > 0 {
		f := res.Failed[0]
		fmt.Fprintf(rs.stderr, "hidden states: %s %d turn %d: %s\n", f.ID, f.Sample, f.Turn, f.Cause)
		herr = fmt.Errorf("hidden states: %d units failed every attempt (listed in %s/%s/%s); run again to ask them again", n, cfg.Output.Dir, hidden.DirName, hidden.FailedName)
	}
	switch {
	case runErr == nil:
		return runfiles.StateDone, herr
	case herr != nil:
		fmt.Fprintf(rs.stderr, "%v\n", herr)
	}
	return runfiles.StateDone, runErr
}

// printHidden adds to inspect's text a line a directory whose run kept
// hidden states: the files kept and their bytes, from its kept log, read
// without changing it (a pass may be appending).
func printHidden(w io.Writer, dirs []string) error {
	for _, d := range dirs {
		hd := filepath.Join(d, hidden.DirName)
		if _, err := os.Stat(filepath.Join(hd, hidden.LogName)); err != nil {
			continue
		}
		log, err := hidden.ReadLog(hd)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("hidden states: %s kept, %s (%d bytes) in %s", pluralNum(int64(len(log.Files())), "file", "files"),
			humanize.IBytes(uint64(log.Bytes())), log.Bytes(), hd)
		if b, err := os.ReadFile(filepath.Join(hd, hidden.FailedName)); err == nil && len(b) > 0 {
			line += fmt.Sprintf("; %d failed in the last pass (%s)", bytes.Count(b, []byte{'\n'}), hidden.FailedName)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// hiddenFigures are the pass's figures as its workers count them, for
// status.json and the progress lines.
type hiddenFigures struct {
	mu                                     sync.Mutex
	state                                  runfiles.State
	units, keptBefore                      atomic.Int64
	kept, failed, errors, bytes, projected atomic.Int64
}

func (f *hiddenFigures) setState(s runfiles.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = s
}

// start takes the units, those kept before and their bytes, and the
// projection, once the pass has counted them.
func (f *hiddenFigures) start(r hidden.Result) {
	f.units.Store(int64(r.Units))
	f.keptBefore.Store(int64(r.Skipped))
	f.bytes.Store(r.Bytes)
	f.projected.Store(r.Projected)
}

// end takes the pass's own result, which a pass refused before its start
// (the disk too small) has too.
func (f *hiddenFigures) end(r hidden.Result) {
	f.start(r)
	f.kept.Store(int64(r.Kept))
	f.failed.Store(int64(len(r.Failed)))
}

func (f *hiddenFigures) record() runfiles.HiddenStatesRecord {
	f.mu.Lock()
	state := f.state
	f.mu.Unlock()
	units, before, kept, failed := int(f.units.Load()), int(f.keptBefore.Load()), int(f.kept.Load()), int(f.failed.Load())
	return runfiles.HiddenStatesRecord{
		State: state, Units: units, Kept: kept, KeptBefore: before, ToExtract: max(units-before-kept-failed, 0),
		Failed: failed, Errors: int(f.errors.Load()), ProjectedBytes: f.projected.Load(), BytesKept: f.bytes.Load(),
	}
}

// hiddenProgress, every interval while the pass runs, rewrites
// status.json (write) and prints a line of the units kept by the pass and
// the bytes kept (none with --quiet). The projection is on the pass's
// first line and its last. The returned stop ends the ticks.
func hiddenProgress(w io.Writer, every time.Duration, fig *hiddenFigures, write func()) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				write()
				if w != io.Discard {
					fmt.Fprintf(w, "hidden states: %d units kept so far, %s\n", fig.kept.Load(), humanize.IBytes(uint64(fig.bytes.Load())))
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}
