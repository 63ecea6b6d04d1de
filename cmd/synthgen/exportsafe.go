package main

// What export may write: never a file it would destroy by accident. An
// existing --out is replaced only when asked (--overwrite), and with --hf
// only when it is a dataset an export wrote (export.Dataset); a path inside
// a synthgen output directory (its manifest, a part: the next run would
// refuse the directory, or read the export as records) or a file of the
// dataset being read is refused always. What a killed export leaves, and
// who removes it, is internal/export's (temp.go); the signals that stop an
// export are exportSignals'.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/synthgen/synthgen/generator/job"
	"github.com/synthgen/synthgen/internal/export"
	"github.com/synthgen/synthgen/sink"
)

// checkExportOut refuses an --out that would destroy data: see above.
// dirs are the directories read, j the job whose dataset they answer.
func checkExportOut(out string, hf, overwrite bool, dirs []string, j job.Job) error {
	if out == "-" {
		return nil
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return usageError(fmt.Errorf("--out %s: %w", out, err), "")
	}
	if d := outputDirAbove(abs); d != "" {
		return usageError(fmt.Errorf("--out %s is inside %s, a synthgen output directory: an export there would be read as its records, or make it refuse to resume", out, d),
			"write the export outside every output directory, e.g. beside it")
	}
	for _, d := range dirs {
		if within(abs, d) {
			return usageError(fmt.Errorf("--out %s is inside %s, a directory being exported", out, d), "write the export outside it")
		}
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usageError(fmt.Errorf("--out %s: %w", out, err), "")
	}
	if f := datasetFile(st, j); f != "" {
		return usageError(fmt.Errorf("--out %s is %s, a file of the dataset (dataset.path) this job reads", out, f),
			"write the export to a new file; the dataset must stay as the job was made from it")
	}
	switch {
	case st.IsDir() && !hf:
		return usageError(fmt.Errorf("--out %s is a directory", out), "give --out a file path (train.jsonl, train.parquet), or --hf to write a dataset directory")
	case hf && !st.IsDir():
		return usageError(fmt.Errorf("--out %s exists and is not a directory", out), "give --hf the path of a new directory")
	case hf:
		if ok, why := export.Dataset(out); !ok {
			return usageError(fmt.Errorf("--out %s exists and is no dataset an export wrote (%s)", out, why),
				"give --hf a new directory, or remove this one first (--overwrite replaces only a dataset an export wrote)")
		}
		if !overwrite {
			return usageError(fmt.Errorf("--out %s exists (a dataset an earlier export wrote)", out), "pass --overwrite to replace it, or give another path")
		}
	case !overwrite:
		return usageError(fmt.Errorf("--out %s exists", out), "pass --overwrite to replace it, or give another path")
	}
	return nil
}

// outputDirAbove is the nearest directory at or above path's directory
// that is a synthgen output directory (it holds manifest.json), or "".
func outputDirAbove(path string) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, sink.ManifestName)); err == nil {
			return dir
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}

// within says whether path (absolute) is dir or below it.
func within(path, dir string) bool {
	d, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(d, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// datasetFile is the file of j's local dataset that st is, or "".
func datasetFile(st os.FileInfo, j job.Job) string {
	matches, _ := filepath.Glob(j.Selection.Path)
	if len(matches) == 0 {
		matches = []string{j.Selection.Path}
	}
	for _, m := range matches {
		if ds, err := os.Stat(m); err == nil && os.SameFile(st, ds) {
			return m
		}
	}
	return ""
}

// uniqueDirs drops a directory named again (another spelling of it, a
// link, an overlapping glob): one directory read twice would be every key
// twice. It returns the directories in their first order and a note for
// each one dropped.
func uniqueDirs(dirs []string) ([]string, []string) {
	var out, notes []string
	var seen []os.FileInfo
	var names []string
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			out = append(out, d) // the audit says what is wrong with it
			continue
		}
		dup := -1
		for i, s := range seen {
			if os.SameFile(st, s) {
				dup = i
				break
			}
		}
		if dup >= 0 {
			notes = append(notes, fmt.Sprintf("%s is %s, given before: read once", d, names[dup]))
			continue
		}
		seen, names = append(seen, st), append(names, d)
		out = append(out, d)
	}
	return out, notes
}

// errInterrupted is the cause of an export's context a signal cancelled.
var errInterrupted = errors.New("interrupted")

// exportSignals is the context of one export: SIGINT or SIGTERM cancels it
// (cause errInterrupted), says so on stderr, and the export removes its
// temporary and ends with exit 130; the signals are then the system's
// again, so a second one kills an export stuck in a write (its temporary
// is then the next export's to remove). A signal the process was started
// ignoring (a background job's SIGINT) stays ignored. stop ends the watch.
func exportSignals(parent context.Context, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			cancel(fmt.Errorf("%w (%v)", errInterrupted, sig))
			// The terminal echoed "^C" where the cursor was: a new line.
			fmt.Fprintf(stderr, "\nexport: %v: stopping; what it wrote is removed (a second signal kills it at once)\n", sig)
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		signal.Stop(sigs)
		cancel(nil)
	}
}
