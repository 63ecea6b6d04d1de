package dataset

// A synthgen output directory as a dataset: dataset.path may name the
// directory a run wrote (a first pass), whose records are then the rows of
// a second pass (judge, score, rewrite). Package dataset/outdir reads the
// directory through the sink's own readers; this package holds the seam
// (Outputs), the identity of such a dataset (stamp.Output) and the source
// that turns its records into rows, as it cannot import the sink.

import (
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"

	"github.com/synthgen/synthgen/dataset/stamp"
)

// Outputs reads synthgen output directories. outdir.Reader (package
// dataset/outdir) is the one; generator and job set it in
// Options.Outputs.
type Outputs interface {
	// Manifest is the name of the file that makes a directory an output
	// directory (the sink's manifest): this package cannot import the
	// sink, and spells the name nowhere.
	Manifest() string
	// Stamp identifies the output directory dir as it is now: its job, its
	// final parts in the order they are read, their sizes, hashes (of
	// every byte, checked against the ones recorded when each was
	// written) and records. It refuses a directory a live run holds,
	// naming its pid, and one whose records are not all in final parts
	// (a run was killed: resume it to its end first).
	Stamp(dir string) (stamp.Output, error)
	// Records calls yield for each record of the final part at path, in
	// file order, with its key and its row: the record's fields by their
	// JSON names (id, sample, source, messages, reasoning, content,
	// finish_reason, model, prompt_tokens, completion_tokens, turns, ...),
	// numbers as json.Number. row is valid until yield returns; it is
	// built only when called. yield returns false to stop. Errors name
	// the file (and line).
	Records(path string, yield func(id string, sample int, row func() map[string]any) bool) error
	// Lines reports whether the records of the part at path are lines, a
	// record a line: a row's position then names its line.
	Lines(path string) bool
}

// KeyID is the id of a second pass's row made of the first pass's record
// (id, sample): the id itself when the first pass asked one sample per
// prompt (samples 1), else "id#sample" ("17#0", "17#1"), so that each
// first-pass key is one row and the two passes join exactly.
func KeyID(id string, sample, samples int) string {
	if samples <= 1 {
		return id
	}
	return id + "#" + strconv.Itoa(sample)
}

// isOutputDir reports whether opts.Path is a directory holding the
// manifest of opts.Outputs.
func isOutputDir(opts Options) bool {
	if opts.Outputs == nil {
		return false
	}
	if st, err := os.Stat(opts.Path); err != nil || !st.IsDir() {
		return false
	}
	_, err := os.Stat(filepath.Join(opts.Path, opts.Outputs.Manifest()))
	return err == nil
}

// StampOutput stamps the output directory opts.Path names (ok false when
// it names none) through opts.Outputs.
func StampOutput(opts Options) (s stamp.Output, ok bool, err error) {
	if isHubPath(opts.Path) {
		return stamp.Output{}, false, nil
	}
	if opts.Outputs == nil {
		if st, err := os.Stat(opts.Path); err == nil && st.IsDir() {
			return stamp.Output{}, true, fmt.Errorf("dataset %s: is a directory: a synthgen output directory is read through dataset.Options.Outputs, and this program set none (package dataset/outdir has one); the files of another are read by a glob such as %s", opts.Path, filepath.Join(opts.Path, "*.jsonl"))
		}
		return stamp.Output{}, false, nil
	}
	if !isOutputDir(opts) {
		return stamp.Output{}, false, nil
	}
	s, err = opts.Outputs.Stamp(opts.Path)
	return s, true, err
}

// reading reports whether o reads an output directory.
func (o Options) reading() bool { return !o.Output.IsZero() }

// checkOutput stamps the output directory o.Path names when the job holds
// no stamp of it yet, and refuses what its rows cannot have.
func (o *Options) checkOutput() error {
	if o.Output.IsZero() {
		s, ok, err := StampOutput(*o)
		if err != nil || !ok {
			return err
		}
		o.Output = s
	}
	if o.IDField != "" {
		return fmt.Errorf("dataset %s is a synthgen output directory: its rows' ids are its keys (id, and #sample when it asked several), so dataset.id_field %q must be empty", o.Path, o.IDField)
	}
	return nil
}

// outputFiles are the paths of the parts s reads, in order.
func outputFiles(dir string, s stamp.Output) []string {
	files := make([]string, len(s.Parts))
	for i, p := range s.Parts {
		files[i] = filepath.Join(dir, "data", p.Name)
	}
	return files
}

// outputSource reads one part of an output directory: its records as rows,
// each row's id its key (KeyID).
type outputSource struct {
	path    string
	samples int
	lines   bool // a record a line: positions name lines
	pull    func() (outputRecord, error, bool)
	stop    func()
	fileRow int64
	id      string // the current row's id
}

type outputRecord struct {
	id     string
	sample int
	row    func() map[string]any
}

var _ source = (*outputSource)(nil)

func openOutputPart(out Outputs, path string, samples int) *outputSource {
	seq := func(yield func(outputRecord, error) bool) {
		stopped := false
		err := out.Records(path, func(id string, sample int, row func() map[string]any) bool {
			if !yield(outputRecord{id: id, sample: sample, row: row}, nil) {
				stopped = true
			}
			return !stopped
		})
		if err != nil && !stopped {
			yield(outputRecord{}, err)
		}
	}
	pull, stop := iter.Pull2(seq)
	return &outputSource{path: path, samples: samples, lines: out.Lines(path), pull: pull, stop: stop}
}

func (s *outputSource) next(decode bool, skip func([]byte) bool) (row, position, *fieldError, error) {
	rec, err, ok := s.pull()
	if !ok {
		return nil, position{}, nil, io.EOF
	}
	if err != nil {
		return nil, position{}, nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	pos := position{fileRow: s.fileRow}
	if s.lines {
		pos.line = s.fileRow + 1 // a record a line, none blank
	}
	s.fileRow++
	s.id = KeyID(rec.id, rec.sample, s.samples)
	if !decode {
		return nil, pos, nil, nil
	}
	if skip != nil && skip(nil) {
		return nil, pos, nil, errSkipped
	}
	return rec.row(), pos, nil, nil
}

func (s *outputSource) close() error {
	s.stop()
	return nil
}

// keyed is a source whose rows carry their own id (an output directory's
// keys), not found in a field.
type keyed interface{ rowID() string }

func (s *outputSource) rowID() string { return s.id }
