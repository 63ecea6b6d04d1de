package dataset

// Which files a selection reads: every file of the dataset in sorted path
// order, or, split by file (dataset.shard_by: files), the shard's own.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/synthgen/synthgen/dataset/stamp"
)

// dsFile is one file a selection reads.
type dsFile struct {
	path  string // where it is read from (a local path; an hf:// file's place in the cache)
	name  string // its path from the dataset's root (FileNames): its rows' ids split by file
	place int    // its place in the sorted listing of every file of the dataset
}

// FileNames are the names of a dataset's files (in sorted path order) as
// ids split by file use them: each file's path from the deepest directory
// holding them all, with forward slashes ("train-00000-of-00006.parquet",
// "en/part-1.jsonl"); a single file's base name. They do not depend on
// where the dataset is (a relative or absolute path, a moved directory,
// the Hub cache), only on the files themselves.
func FileNames(paths []string) []string {
	names := make([]string, len(paths))
	if len(paths) == 0 {
		return names
	}
	root := filepath.Dir(paths[0])
	for _, p := range paths[1:] {
		for !underDir(p, root) {
			parent := filepath.Dir(root)
			if parent == root {
				break
			}
			root = parent
		}
	}
	for i, p := range paths {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			rel = filepath.Base(p)
		}
		names[i] = filepath.ToSlash(rel)
	}
	return names
}

// underDir reports whether path is inside dir (lexically).
func underDir(path, dir string) bool {
	if dir == "." {
		return !filepath.IsAbs(path) && !strings.HasPrefix(filepath.Clean(path), "..")
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != ".."
}

// selectFiles resolves the options' path to the files the selection reads,
// in order, and the fetcher of an hf:// dataset's. Split by file, a shard
// that takes no file is an error: the split has more shards than the
// dataset has files.
func (o Options) selectFiles() ([]dsFile, fetcher, error) {
	paths, fetch, err := resolveFiles(o)
	if err != nil {
		return nil, nil, err
	}
	names := FileNames(paths)
	files := make([]dsFile, 0, len(paths))
	for i, p := range paths {
		if o.ByFile() && !o.TakesFile(i) {
			continue
		}
		files = append(files, dsFile{path: p, name: names[i], place: i})
	}
	if len(files) == 0 {
		return nil, nil, &ShardFilesError{Path: o.Path, Shard: o.Shard, Files: len(paths)}
	}
	return files, fetch, nil
}

// ShardFilesError is a shard of a split by file that takes no file: there
// are more shards than the dataset has files.
type ShardFilesError struct {
	Path  string
	Shard Shard
	Files int // the dataset's files
}

func (e *ShardFilesError) Error() string {
	return fmt.Sprintf("dataset %s: shard %s takes no file: split by file (dataset.shard_by: files) each shard reads whole files, and the dataset has %d; use at most %d shards, or dataset.shard_by: rows",
		e.Path, e.Shard, e.Files, e.Files)
}

// List returns the names and sizes of every file of a local dataset (a
// stat each, no byte read); nil for hf:// datasets, whose pinned revision
// already names every file.
func List(opts Options) (stamp.Listing, error) {
	if isHubPath(opts.Path) {
		return nil, nil
	}
	paths, err := resolve(opts.Path)
	if err != nil {
		return nil, err
	}
	names := FileNames(paths)
	l := make(stamp.Listing, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		l[i] = stamp.ListedFile{Name: names[i], Size: st.Size()}
	}
	return l, nil
}
