package view

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/synthgen/synthgen/sink"
)

// dataFile is a file of DIR/data whose records count.
type dataFile struct {
	name string // under DIR/data
	part sink.Part
	size int64
	mod  time.Time
}

// final reports whether the file is a final part (not .open, .journal).
func (f dataFile) final() bool { return f.part.Suffix == "" }

// countedFiles lists the files of dataDir whose records count, the way the
// audit (sink/audit) counts them, in part order: every final part, and a
// part being filled (.open, .journal) while its final part does not exist;
// not a .tmp of a cut Parquet conversion. A file that vanishes between the
// listing and its stat (finalized since) is left out: the next listing
// finds what it became. No data directory is no files.
func countedFiles(dataDir string) ([]dataFile, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	finals := map[string]bool{}
	var parts []dataFile
	for _, e := range entries {
		p, ok := sink.ParsePart(e.Name())
		if !ok || !e.Type().IsRegular() || p.Suffix == sink.SuffixTmp {
			continue
		}
		if p.Suffix == "" {
			finals[e.Name()] = true
		}
		parts = append(parts, dataFile{name: e.Name(), part: p})
	}
	out := parts[:0]
	for _, f := range parts {
		if !f.final() && finals[f.part.Final()] {
			continue // renamed or converted: the final holds its records
		}
		st, err := os.Stat(filepath.Join(dataDir, f.name))
		if err != nil {
			continue
		}
		f.size, f.mod = st.Size(), st.ModTime()
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b dataFile) int {
		return cmp.Or(cmp.Compare(a.part.Index, b.part.Index), strings.Compare(a.name, b.name))
	})
	return out, nil
}

// errorsState is what decides whether DIR/errors must be read again: each
// error file's name, size and modification time.
func errorsState(errDir string) (string, error) {
	names, err := sink.ErrorFiles(errDir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(errDir, n)); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", n, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String(), nil
}
