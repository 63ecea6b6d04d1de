package export

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/internal/extsort"
	"github.com/synthgen/synthgen/sink"
)

// The order of the output is (id, sample), while the shards hold records in
// the order they were answered. Sorting the records themselves would hold
// a whole job in memory (a 1M-record job with reasoning is tens of GB), so
// the export reads every file once to build an index of small entries
// (key, file, byte span), sorts it on disk (internal/extsort: sorted runs
// in a temporary file beside the output, merged), and then reads each
// record again at its place. The cost: indexBudget of memory whatever the
// number of records, about 20 bytes plus the id's length per record of
// temporary disk, a histogram of completion lengths for the percentiles,
// and a second read of the data, mostly from the page cache. A JSONL line is read back from its
// shard; a Parquet row has no byte span, so it is copied once, as JSON, to
// a spill file beside the output (unlinked at once where the system allows
// it, else removed at the end): that costs one extra write of the Parquet
// shards' records.

// entry is one row of the output, a record or (openai-batch
// --include-errors) an error record.
type entry struct {
	id     string
	sample int32
	src    int32 // index in index.srcs; -1: an error record, span.Len its index in errs
	off    int64
	n      int32
}

type index struct {
	sorter *extsort.Sorter[entry] // the entries, sorted on disk
	srcs   []string               // JSONL files to read spans from; the spill file last when there is one
	spill  *os.File
	// spillSrc is the spill file's index in srcs; unlinked says its name
	// is gone already (removed as soon as it was created, which Unix
	// allows with the file open: a kill leaves nothing of it).
	spillSrc int32
	unlinked bool
	errs     []*sink.ErrorRecord
	open     map[int32]*os.File
}

func (x *index) close() {
	if x.sorter != nil {
		_ = x.sorter.Close()
	}
	for _, f := range x.open {
		_ = f.Close()
	}
	if x.spill != nil {
		_ = x.spill.Close()
		if !x.unlinked {
			_ = os.Remove(x.spill.Name())
		}
	}
}

// buildIndex reads every record of the report's files once, applies the
// filters, counts what is exported, and sorts the entries by key.
func buildIndex(ctx context.Context, o Options, tmpDir, spillPattern string) (*index, *Summary, error) {
	x := &index{open: map[int32]*os.File{}, spillSrc: -1, sorter: extsort.New(entryCodec, extsort.Options{Dir: tmpDir, Pattern: ".synthgen-export-*.index", Budget: indexBudget})}
	filters := o.filters()
	sum := &Summary{Format: o.Format, Out: o.Out, FinishReasons: map[string]int64{}}
	completion := map[int32]int64{} // completion tokens -> records
	var spillOff int64
	for _, path := range o.Report.Files() {
		if err := ctx.Err(); err != nil {
			return x, nil, err
		}
		src := int32(len(x.srcs))
		// A record of a file of lines is read again at its line; one of
		// a converted part (a Parquet row) is spilled as a line of its own.
		spill := !sink.Lines(path)
		if !spill {
			x.srcs = append(x.srcs, path)
		}
		err := sink.ForEachRecord(path, func(rec *sink.Record, at sink.Span) error {
			sum.Read++
			if i := drop(filters, rec, o.Reasoning); i >= 0 {
				filters[i].Dropped++
				return nil
			}
			var kept []sink.Turn
			if o.perTurn() {
				if why := speculatorsMissing(rec, o.Job.Sampling.ReturnTokenIDs); why != "" {
					return errors.New(why)
				}
				var cut int
				var noFile []int
				kept, cut, noFile = speculatorsKept(rec, o.KeepTruncated, o.hidden.has(rec))
				filters[0].Dropped += int64(cut) // filters[0] is truncated, per turn here
				if len(noFile) > 0 {
					filters[len(filters)-1].Dropped += int64(len(noFile)) // the hidden_states filter is last
					sum.noHidden(rec, o.Job.Samples() > 1, noFile)
				}
				if len(kept) == 0 {
					return nil
				}
			}
			e := entry{id: rec.ID, sample: int32(rec.Sample), src: src, off: at.Offset, n: int32(at.Len)}
			if spill {
				if x.spill == nil {
					f, err := os.CreateTemp(tmpDir, spillPattern)
					if err != nil {
						return fmt.Errorf("spill file: %w", err)
					}
					x.spill, x.unlinked = f, os.Remove(f.Name()) == nil
					x.spillSrc = int32(len(x.srcs))
					x.srcs = append(x.srcs, f.Name())
				}
				line, err := json.Marshal(rec)
				if err != nil {
					return err
				}
				if _, err := x.spill.Write(line); err != nil {
					return fmt.Errorf("spill file: %w", err)
				}
				e.src, e.off, e.n = x.spillSrc, spillOff, int32(len(line))
				spillOff += int64(len(line))
			}
			if err := x.sorter.Add(e); err != nil {
				return err
			}
			sum.countTools(rec)
			if o.perTurn() {
				// A row is a turn: its tokens, finish reason and reasoning.
				sum.Exported += int64(len(kept))
				for _, t := range kept {
					sum.PromptTokens += int64(t.PromptTokens)
					sum.CompletionTokens += int64(t.CompletionTokens)
					sum.FinishReasons[t.FinishReason]++
					if t.Reasoning != "" {
						sum.WithReasoning++
					}
					completion[int32(t.CompletionTokens)]++
				}
				return nil
			}
			sum.Exported++
			sum.PromptTokens += int64(rec.PromptTokens)
			sum.CompletionTokens += int64(rec.CompletionTokens)
			sum.FinishReasons[rec.FinishReason]++
			if hasReasoning(rec) {
				sum.WithReasoning++
			}
			completion[int32(rec.CompletionTokens)]++
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			return x, nil, fmt.Errorf("%s is gone: a run finalized it since the check; export again when the run has stopped", path)
		}
		if err != nil {
			return x, nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	sum.Filters = filters
	if err := x.addErrors(o, sum); err != nil {
		return x, nil, err
	}
	sum.CompletionP50, sum.CompletionP90 = percentile(completion, 50), percentile(completion, 90)
	return x, sum, nil
}

// addErrors counts the keys that failed for good (the last error record of
// a key no record superseded, in any directory) and, for --include-errors,
// indexes them as rows. There are few; they are held.
func (x *index) addErrors(o Options, sum *Summary) error {
	last := map[sink.Key]*sink.ErrorRecord{}
	for _, dir := range o.Dirs {
		err := sink.ForEachError(dir, func(e *sink.ErrorRecord) error {
			if o.Report.Failed(e.Key()) {
				c := *e
				last[e.Key()] = &c
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s errors: %w", dir, err)
		}
	}
	sum.Failed = int64(len(last))
	if !o.IncludeErrors {
		return nil
	}
	for _, e := range last {
		if err := x.sorter.Add(entry{id: e.ID, sample: int32(e.Sample), src: -1, n: int32(len(x.errs))}); err != nil {
			return err
		}
		x.errs = append(x.errs, e)
	}
	sum.ErrorLines = int64(len(x.errs))
	return nil
}

// record reads entry e's record into rec.
func (x *index) record(e entry, rec *sink.Record, buf []byte) ([]byte, error) {
	f, ok := x.open[e.src]
	switch {
	case e.src == x.spillSrc:
		f = x.spill
	case !ok:
		if len(x.open) >= maxOpen {
			for k, g := range x.open {
				_ = g.Close()
				delete(x.open, k)
				break
			}
		}
		var err error
		if f, err = openShard(x.srcs[e.src]); err != nil {
			return buf, err
		}
		x.open[e.src] = f
	}
	buf = slices.Grow(buf[:0], int(e.n))[:e.n]
	if _, err := f.ReadAt(buf, e.off); err != nil {
		return buf, fmt.Errorf("read %s at %d: %w", x.srcs[e.src], e.off, err)
	}
	*rec = sink.Record{}
	if err := json.Unmarshal(buf, rec); err != nil {
		return buf, fmt.Errorf("%s at %d: %w", x.srcs[e.src], e.off, err)
	}
	if rec.ID != e.id || rec.Sample != int(e.sample) {
		return buf, fmt.Errorf("%s changed while exporting (id %q sample %d is not at its place): export again when no run writes the directory", x.srcs[e.src], e.id, e.sample)
	}
	return buf, nil
}

// each calls fn with the entries in key order.
func (x *index) each(fn func(i int, e entry) error) error {
	it, err := x.sorter.Sorted()
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			break
		}
		if err := fn(i, e); err != nil {
			return err
		}
	}
	return it.Err()
}

// indexBudget is the memory the entries are sorted in before a run of them
// is spilled.
var indexBudget = 32 << 20

// entryCodec orders entries by key (then by place, for a total order) and
// stores one as its sample, file, span and id.
var entryCodec = extsort.Codec[entry]{
	Cmp: func(a, b entry) int {
		return cmp.Or(sink.CompareKeys(sink.Key{ID: a.id, Sample: int(a.sample)}, sink.Key{ID: b.id, Sample: int(b.sample)}),
			cmp.Compare(a.src, b.src), cmp.Compare(a.off, b.off))
	},
	Size: func(e entry) int { return 40 + len(e.id) + 8 },
	Append: func(buf []byte, e entry) []byte {
		buf = binary.AppendUvarint(buf, uint64(e.sample))
		buf = binary.AppendVarint(buf, int64(e.src))
		buf = binary.AppendUvarint(buf, uint64(e.off))
		buf = binary.AppendUvarint(buf, uint64(e.n))
		return append(buf, e.id...)
	},
	Decode: func(b []byte) (entry, error) {
		var e entry
		var vals [4]uint64
		for i := range vals {
			var n int
			if i == 1 {
				var v int64
				v, n = binary.Varint(b)
				vals[i] = uint64(v)
			} else {
				vals[i], n = binary.Uvarint(b)
			}
			if n <= 0 {
				return e, errors.New("export index entry does not decode")
			}
			b = b[n:]
		}
		e.sample, e.src, e.off, e.n = int32(vals[0]), int32(int64(vals[1])), int64(vals[2]), int32(vals[3])
		e.id = string(b)
		return e, nil
	},
}

// maxOpen bounds the shards held open while records are read in key order.
const maxOpen = 64

// openShard opens a JSONL data file; a .open file a run has finalized
// since it was indexed is read under its final name (same bytes).
func openShard(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(path, ".open") {
		f, err = os.Open(strings.TrimSuffix(path, ".open"))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: a run moved it since the check; export again when the run has stopped", err)
	}
	return f, nil
}

// hasReasoning says whether a record's answer (any of its turns) carries
// reasoning.
func hasReasoning(rec *sink.Record) bool {
	if rec.Reasoning != "" {
		return true
	}
	for _, t := range rec.Turns {
		if t.Reasoning != "" {
			return true
		}
	}
	return false
}
