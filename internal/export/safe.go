package export

// What an export may write: never a file it would destroy by accident. An
// existing Out is replaced only when asked (Overwrite), and with HF only
// when it is a dataset an export wrote (Dataset); a path inside a synthgen
// output directory (its manifest, a part: the next run would refuse the
// directory, or read the export as records) or a file of the dataset being
// read is refused always. Run checks it first, so no caller can skip it.
// What a killed export leaves, and who removes it, is temp.go's; the
// signals that stop an export are signals.go's.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/synthgen/synthgen/generator/job"
	"github.com/synthgen/synthgen/sink"
)

// RefusedError is an Out the export will not write, with what to do.
type RefusedError struct {
	Err  error
	hint string
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Hint says what to do instead.
func (e *RefusedError) Hint() string { return e.hint }

func refuse(hint, format string, args ...any) error {
	return &RefusedError{Err: fmt.Errorf(format, args...), hint: hint}
}

// checkOut refuses an Out that would destroy data: see above.
func (o *Options) checkOut() error {
	out := o.Out
	if out == "-" {
		return nil
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return refuse("", "--out %s: %w", out, err)
	}
	if d := outputDirAbove(abs); d != "" {
		return refuse("write the export outside every output directory, e.g. beside it",
			"--out %s is inside %s, a synthgen output directory: an export there would be read as its records, or make it refuse to resume", out, d)
	}
	for _, d := range o.Dirs {
		if within(abs, d) {
			return refuse("write the export outside it", "--out %s is inside %s, a directory being exported", out, d)
		}
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return refuse("", "--out %s: %w", out, err)
	}
	if f := datasetFile(st, o.Job); f != "" {
		return refuse("write the export to a new file; the dataset must stay as the job was made from it",
			"--out %s is %s, a file of the dataset (dataset.path) this job reads", out, f)
	}
	switch {
	case st.IsDir() && !o.HF:
		return refuse("give --out a file path (train.jsonl, train.parquet), or --hf to write a dataset directory", "--out %s is a directory", out)
	case o.HF:
		return o.replaceable()
	case !o.Overwrite:
		return refuse("pass --overwrite to replace it, or give another path", "--out %s exists", out)
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
