package export

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// dataFile is the name of an HF export's Parquet files (writeHF).
var dataFile = regexp.MustCompile(`^train-[0-9]{5}-of-[0-9]{5}\.parquet$`)

// Dataset reports whether dir is a dataset directory an export wrote, so
// that --overwrite may replace it: README.md, a card as Card writes it, and
// data/ holding only train-NNNNN-of-NNNNN.parquet files. Anything else in
// it (a .git of a Hub clone, the user's own files) is no export's: why
// names the first such entry.
func Dataset(dir string) (ok bool, why string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err.Error()
	}
	card := false
	for _, e := range entries {
		switch {
		case e.Name() == "README.md" && e.Type().IsRegular():
			if !isCard(filepath.Join(dir, e.Name())) {
				return false, "its README.md is no dataset card synthgen wrote"
			}
			card = true
		case e.Name() == "data" && e.IsDir():
			files, err := os.ReadDir(filepath.Join(dir, "data"))
			if err != nil {
				return false, err.Error()
			}
			for _, f := range files {
				if !f.Type().IsRegular() || !dataFile.MatchString(f.Name()) {
					return false, "it holds data/" + f.Name()
				}
			}
		default:
			return false, "it holds " + e.Name()
		}
	}
	if !card {
		return false, "it has no README.md dataset card"
	}
	return true, ""
}

// isCard says whether the file begins as Card's output does.
func isCard(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(cardHead))
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == cardHead
}

// replaceable checks what is under Out before an HF export writes it:
// nothing, or (with Overwrite) a dataset an export wrote.
func (o *Options) replaceable() error {
	st, err := os.Lstat(o.Out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--out %s: %w", o.Out, err)
	case !st.IsDir():
		return refuse("give --hf the path of a new directory", "--out %s exists and is not a directory", o.Out)
	}
	if ok, why := Dataset(o.Out); !ok {
		return refuse("give --hf a new directory, or remove this one first (--overwrite replaces only a dataset an export wrote)",
			"--out %s exists and is no dataset an export wrote (%s)", o.Out, why)
	}
	if !o.Overwrite {
		return refuse("pass --overwrite to replace it, or give another path", "--out %s exists (a dataset an earlier export wrote)", o.Out)
	}
	return nil
}

// swapNames is exchange; a test takes it away to run the two renames.
var swapNames = exchange

// putInPlace gives the complete directory tmp the name out, replacing the
// dataset under out when there is one (replaceable allowed it). Where the
// system swaps two names in one step (Linux renameat2), out holds the old
// dataset or the new one at every instant, and the old one, under tmp's
// name afterwards, is removed (or, if the export is killed first, by the
// next export: temp.go). Elsewhere the old dataset is first renamed to
// .OUT.synthgen-export-DIGITS.old: a kill between the two renames leaves it
// there, never removed by an export.
func putInPlace(tmp, out string) error {
	if _, err := os.Lstat(out); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(tmp, out); err != nil {
			if _, serr := os.Lstat(out); serr == nil {
				return fmt.Errorf("--out %s appeared while the export ran: give another path, or --overwrite to replace it", out)
			}
			return err
		}
		return nil
	}
	// The new dataset is in place once a rename succeeded: removing the old
	// one is then no reason to fail (under tmp's name the next export
	// removes what is left of it).
	switch err := swapNames(tmp, out); {
	case err == nil:
		_ = os.RemoveAll(tmp)
		return nil
	case !errors.Is(err, errors.ErrUnsupported):
		return fmt.Errorf("replace %s: %w", out, err)
	}
	old := strings.TrimSuffix(tmp, ".tmp") + ".old"
	if err := os.Rename(out, old); err != nil {
		return fmt.Errorf("replace %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		if rerr := os.Rename(old, out); rerr != nil {
			return fmt.Errorf("replace %s (the dataset it held is %s now): %w", out, old, err)
		}
		return fmt.Errorf("replace %s: %w", out, err)
	}
	_ = os.RemoveAll(old)
	return nil
}
