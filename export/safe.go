package export

// What an export may write: never a file it would destroy by accident. An
// existing Out is replaced only when asked (Overwrite), and with HF only
// when it is a dataset an export wrote (Dataset); a path inside a synthgen
// output directory (its manifest, a part: the next run would refuse the
// directory, or read the export as records) or a file of the dataset being
// read (by path, or by size and hash) is refused always, as is any
// overwrite while the dataset cannot be found. Run checks it first, so no
// caller can skip it. What a killed export leaves, and who removes it, is
// temp.go's; the signals that stop an export are signals.go's.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/job/plan"
	"github.com/synthgen/synthgen/sink/layout"
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
	if d := layout.DirAbove(abs); d != "" {
		return refuse("write the export outside every output directory, e.g. beside it",
			"--out %s is inside %s, a synthgen output directory: an export there would be read as its records, or make it refuse to resume", out, d)
	}
	for _, d := range o.Dirs {
		if layout.Within(abs, d) {
			return refuse("write the export outside it", "--out %s is inside %s, a directory being exported", out, d)
		}
	}
	if o.Format == FormatSpeculatorsHidden {
		return newDirOut(out)
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return refuse("", "--out %s: %w", out, err)
	}
	what, found, err := datasetFile(out, st, o.Job.Selection)
	if err != nil {
		return refuse("", "--out %s: %w", out, err)
	}
	if what != "" {
		return refuse("write the export to a new file; the dataset must stay as the job was made from it",
			"--out %s is %s this job reads", out, what)
	}
	switch {
	case st.IsDir() && !o.HF:
		return refuse("give --out a file path (train.jsonl, train.parquet), or --hf to write a dataset directory", "--out %s is a directory", out)
	case o.HF:
		return o.replaceable()
	case !o.Overwrite:
		return refuse("pass --overwrite to replace it, or give another path", "--out %s exists", out)
	case !found:
		return refuse("give --out a new path, or export from where the dataset's path resolves",
			"--out %s exists and the job's dataset (dataset.path %s) cannot be found from here: it could be the file --overwrite would destroy", out, o.Job.Selection.Path)
	}
	return nil
}

// datasetFile says which file of sel's local dataset out (st) is, by path
// or by size and hash ("" when none), and whether any of its files was
// found from here. The files are sel.Path's, and those the manifest stamped
// (their absolute paths, sizes and hashes), which a relative dataset.path
// made in another directory no longer names. A dataset on the Hub or a
// first pass's output directory is no file --out can be (layout.DirAbove
// guards the latter): found.
func datasetFile(out string, st os.FileInfo, sel dataset.Selection) (what string, found bool, err error) {
	if strings.HasPrefix(sel.Path, "hf://") || !sel.Output.IsZero() {
		return "", true, nil
	}
	where := plan.Resolve(sel) // a relative path made elsewhere, under its stamps' directory
	paths, _ := filepath.Glob(where)
	if len(paths) == 0 {
		paths = []string{where}
	}
	stamps := append(slices.Clone(sel.Content), sel.ShardContent...)
	for _, f := range stamps {
		if f.Path != "" {
			paths = append(paths, f.Path)
		}
	}
	for _, p := range paths {
		ds, err := os.Stat(p)
		if err != nil {
			continue
		}
		found = true
		if os.SameFile(st, ds) {
			return p + ", a file of the dataset (dataset.path)", true, nil
		}
	}
	sum := ""
	for _, f := range stamps {
		if f.Size != st.Size() || st.IsDir() {
			continue
		}
		if sum == "" {
			if sum, err = xxh64File(out); err != nil {
				return "", found, err
			}
		}
		if sum == f.XXH64 {
			return fmt.Sprintf("a file of the same size and hash as %s, a file of the dataset (dataset.path)", cmp.Or(f.Path, f.Name)), found, nil
		}
	}
	return "", found, nil
}

// xxh64File is a file's hash as a dataset.FileStamp records it.
func xxh64File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := xxhash.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%016x", h.Sum64()), nil
}
