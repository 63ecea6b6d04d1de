package dataset

// A synthgen output directory as a dataset: dataset.path may name the
// directory a run wrote (a first pass), whose records are then the rows of
// a second pass (judge, score, rewrite). Package dataset/outdir reads the
// directory through the sink's own readers; this package holds the seam
// (Outputs), the identity of such a dataset (OutputStamp) and the source
// that turns its records into rows, as it cannot import the sink.

import (
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Outputs reads synthgen output directories. outdir.Reader (package
// dataset/outdir) is the one; generator and generator/job set it in
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
	Stamp(dir string) (OutputStamp, error)
	// Records calls yield for each record of the final part at path, in
	// file order, with its key and its row: the record's fields by their
	// JSON names (id, sample, source, messages, reasoning, content,
	// finish_reason, model, prompt_tokens, completion_tokens, turns, ...),
	// numbers as json.Number. row is valid until yield returns; it is
	// built only when called. yield returns false to stop. Errors name
	// the file (and line).
	Records(path string, yield func(id string, sample int, row func() map[string]any) bool) error
}

// OutputStamp is the identity of an output directory read as a dataset:
// the job that made its records and its final parts, which a resume
// compares with the directory as it is then.
type OutputStamp struct {
	// JobHash is the directory's job (its manifest's job_hash).
	JobHash string `json:"job_hash"`
	// Samples is the largest generation.n of the jobs that wrote it: above
	// 1 a row's id carries its sample (KeyID).
	Samples int         `json:"n"`
	Parts   []PartStamp `json:"parts"`
}

// PartStamp is one final part of an OutputStamp.
type PartStamp struct {
	Name    string `json:"name"` // under DIR/data
	Records int    `json:"records"`
	Size    int64  `json:"size"`
	XXH64   string `json:"xxh64"`
}

// IsZero reports whether s names no output directory.
func (s OutputStamp) IsZero() bool { return s.JobHash == "" && len(s.Parts) == 0 && s.Samples == 0 }

// Identity is what a job's hash covers: the job, n, and each part's name,
// size and hash in order ("" for none).
func (s OutputStamp) Identity() string {
	if s.IsZero() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "job %s;n %d", s.JobHash, s.Samples)
	for _, p := range s.Parts {
		fmt.Fprintf(&b, ";%s:%d:%d:%s", p.Name, p.Records, p.Size, p.XXH64)
	}
	return b.String()
}

// Records is the number of records, the rows the directory holds.
func (s OutputStamp) Records() int64 {
	var n int64
	for _, p := range s.Parts {
		n += int64(p.Records)
	}
	return n
}

// String is the stamp for a person: "job 1a2b3c4d5e6f, 3 parts, 2400 records".
func (s OutputStamp) String() string {
	if s.IsZero() {
		return "(none)"
	}
	return fmt.Sprintf("job %.12s, %d parts, %d records", s.JobHash, len(s.Parts), s.Records())
}

// DescribeChange says what changed from old to s, part by part.
func (s OutputStamp) DescribeChange(old any) string {
	o, ok := old.(OutputStamp)
	if !ok {
		return ""
	}
	var out []string
	if o.JobHash != s.JobHash {
		out = append(out, fmt.Sprintf("its job %.12s -> %.12s (a forced run of another job wrote into it)", o.JobHash, s.JobHash))
	}
	if o.Samples != s.Samples {
		out = append(out, fmt.Sprintf("its generation.n %d -> %d", o.Samples, s.Samples))
	}
	was := map[string]PartStamp{}
	for _, p := range o.Parts {
		was[p.Name] = p
	}
	for _, p := range s.Parts {
		w, ok := was[p.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("data/%s is new (%d records)", p.Name, p.Records))
		case w != p:
			out = append(out, fmt.Sprintf("data/%s changed (%d records, %d bytes, xxh64 %s; %d, %d, %s when this job started)",
				p.Name, p.Records, p.Size, p.XXH64, w.Records, w.Size, w.XXH64))
		}
		delete(was, p.Name)
	}
	for _, p := range o.Parts {
		if _, gone := was[p.Name]; gone {
			out = append(out, fmt.Sprintf("data/%s is gone (it held %d records)", p.Name, p.Records))
		}
	}
	return strings.Join(out, "; ")
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
func StampOutput(opts Options) (s OutputStamp, ok bool, err error) {
	if isHubPath(opts.Path) {
		return OutputStamp{}, false, nil
	}
	if opts.Outputs == nil {
		if st, err := os.Stat(opts.Path); err == nil && st.IsDir() {
			return OutputStamp{}, true, fmt.Errorf("dataset %s: is a directory: a synthgen output directory is read through dataset.Options.Outputs, and this program set none (package dataset/outdir has one); the files of another are read by a glob such as %s", opts.Path, filepath.Join(opts.Path, "*.jsonl"))
		}
		return OutputStamp{}, false, nil
	}
	if !isOutputDir(opts) {
		return OutputStamp{}, false, nil
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
func outputFiles(dir string, s OutputStamp) []string {
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
	jsonl   bool
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
	return &outputSource{path: path, samples: samples, jsonl: strings.HasSuffix(path, ".jsonl"), pull: pull, stop: stop}
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
	if s.jsonl {
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
