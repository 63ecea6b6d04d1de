package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// runHidden is the hidden-state pass after a run that ended: every record
// of output.dir with token ids, its states kept once under DIR/hidden. A
// unit that failed every attempt makes the run's exit non-zero; a later
// run asks it again.
func runHidden(ctx context.Context, cfg config.Config, notes, stderr io.Writer) error {
	hc := hiddenConfig(cfg)
	fmt.Fprintf(notes, "hidden states: %s a token (%d layers × %d, bf16, and its id); extracting from %s into %s/%s\n",
		humanize.IBytes(uint64(hidden.BytesPerToken(hc.Layers, hc.HiddenSize))), hc.Layers, hc.HiddenSize, hc.BaseURL, cfg.Output.Dir, hidden.DirName)
	var kept, keptBytes atomic.Int64
	stop := hiddenProgress(notes, cfg.Progress.Interval, &kept, &keptBytes)
	res, err := hidden.Run(ctx, cfg.Output.Dir, hc, hidden.Hooks{
		Start: func(r hidden.Result) {
			fmt.Fprintf(notes, "hidden states: %d units, %d kept before; %s projected for the rest\n", r.Units, r.Skipped, humanize.IBytes(uint64(r.Projected)))
		},
		Kept: func(e hidden.Entry) {
			kept.Add(1)
			keptBytes.Add(e.Bytes)
		},
	})
	stop()
	// report.json was written when the run ended; the pass's figures join it.
	if rerr := runfiles.AddHiddenStates(cfg.Output.Dir, runfiles.HiddenStatesRecord{
		Units: res.Units, Kept: res.Kept, KeptBefore: res.Skipped, Failed: len(res.Failed),
		ProjectedBytes: res.Projected, BytesKept: res.Bytes,
	}); rerr != nil {
		fmt.Fprintf(stderr, "warning: hidden states: %v\n", rerr)
	}
	fmt.Fprintf(notes, "hidden states: %d units, %d kept now, %d kept before, %d failed; projected %s at start, %s kept (%d bytes)\n",
		res.Units, res.Kept, res.Skipped, len(res.Failed), humanize.IBytes(uint64(res.Projected)), humanize.IBytes(uint64(res.Bytes)), res.Bytes)
	if err != nil {
		return err
	}
	if n := len(res.Failed); n > 0 {
		f := res.Failed[0]
		fmt.Fprintf(stderr, "hidden states: %s %d turn %d: %s\n", f.ID, f.Sample, f.Turn, f.Cause)
		return fmt.Errorf("hidden states: %d units failed every attempt (listed in %s/%s/%s); run again to ask them again", n, cfg.Output.Dir, hidden.DirName, hidden.FailedName)
	}
	return nil
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

// hiddenProgress prints a line every interval while the pass runs: the
// units kept by it and their bytes. The projection is on the pass's first
// line and its last. The returned stop ends the lines.
func hiddenProgress(w io.Writer, every time.Duration, kept, bytes *atomic.Int64) (stop func()) {
	if w == io.Discard || every <= 0 {
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
				fmt.Fprintf(w, "hidden states: %d units kept so far, %s\n", kept.Load(), humanize.IBytes(uint64(bytes.Load())))
			}
		}
	}()
	return func() { close(done); <-ended }
}
