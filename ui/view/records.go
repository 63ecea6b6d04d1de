package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// decodeRecord decodes one JSONL line of a data part, as the sink's
// readers do.
func decodeRecord(line []byte, rec *sink.Record) error { return json.Unmarshal(line, rec) }

// Row is one entry with its record read from its part: what the table and
// the record page show.
type Row struct {
	Pos     int32
	Dir     int
	Part    string       // file name under DIR/data; "" for a key that failed for good
	Record  *sink.Record // nil for a key that failed for good
	Failed  *sink.ErrorRecord
	Errors  int // error records of its key
	Finish  string
	Flags   uint8
	Compl   int
	Prompt  int
	Latency time.Duration
	TTFT    time.Duration
	RLen    int
	CLen    int

	skipped bool // a search's look at the line found nothing: not decoded
}

// ID and Sample are the row's key.
func (r Row) ID() string {
	if r.Record != nil {
		return r.Record.ID
	}
	if r.Failed != nil {
		return r.Failed.ID
	}
	return ""
}

// Sample is the key's sample.
func (r Row) Sample() int {
	if r.Record != nil {
		return r.Record.Sample
	}
	if r.Failed != nil {
		return r.Failed.Sample
	}
	return 0
}

// Truncated, NoReasoning, ThinkTags, HadErrors, FailedForGood, ToolCalls
// and Diverged are the row's flags.
func (r Row) Truncated() bool     { return r.Flags&flagTruncated != 0 }
func (r Row) NoReasoning() bool   { return r.Flags&flagNoReasoning != 0 && r.Flags&flagFailed == 0 }
func (r Row) ThinkTags() bool     { return r.Flags&flagThinkTags != 0 }
func (r Row) HadErrors() bool     { return r.Flags&flagErrHistory != 0 }
func (r Row) FailedForGood() bool { return r.Flags&flagFailed != 0 }
func (r Row) ToolCalls() bool     { return r.Flags&flagToolCalls != 0 }
func (r Row) Diverged() bool      { return r.Flags&flagDiverged != 0 }

// errPartMoved means a part was finalized or moved between the index and
// the read; a refresh finds it.
var errPartMoved = errors.New("the part moved since the index was read (a live run finalized it): reload the page")

// rows reads the entries at positions, in that order, each part opened
// once for the positions of it that follow each other. With keep, a JSONL
// line is decoded only when keep says so (a search's first look); the
// others are left skipped.
func (ix *Index) rows(positions []int32, keep func(line []byte) bool) ([]Row, error) {
	out := make([]Row, len(positions))
	type want struct {
		seg   int
		path  string
		lines bool  // the part's records are lines: a search looks at them first
		idx   []int // into out
		locs  []int64
	}
	var groups []*want
	ix.mu.RLock()
	bySeg := map[int]*want{}
	for k, p := range positions {
		if int(p) >= ix.n || p < 0 {
			ix.mu.RUnlock()
			return nil, fmt.Errorf("no entry %d", p)
		}
		b, j := ix.at(int(p))
		s := int(b.loc[j] >> locBits)
		seg := ix.segs[s]
		r := Row{Pos: p, Dir: seg.dir, Part: seg.name, Finish: ix.finish[b.finish[j]], Flags: b.flags[j],
			Compl: int(b.compl[j]), Prompt: int(b.prompt[j]),
			Latency: time.Duration(float64(b.lat[j]) * float64(time.Millisecond)),
			TTFT:    time.Duration(float64(b.ttft[j]) * float64(time.Millisecond)),
			RLen:    int(b.rlen[j]), CLen: int(b.clen[j])}
		if b.flags[j]&flagFailed != 0 {
			ek := ix.errKeys[b.loc[j]&locMask]
			last := ek.last
			r.Failed, r.Errors, r.Part = &last, ek.count, ""
			out[k] = r
			continue
		}
		out[k] = r
		g := bySeg[s]
		if g == nil {
			g = &want{seg: s, path: layout.Dir(ix.dirs[seg.dir]).DataPart(seg.name), lines: seg.lines}
			bySeg[s] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, k)
		g.locs = append(g.locs, int64(b.loc[j]&locMask))
	}
	ix.mu.RUnlock()
	for _, g := range groups {
		var err error
		if keep != nil && g.lines {
			err = sink.ReadLinesAt(g.path, g.locs, func(i int, line []byte) error {
				if !keep(line) {
					out[g.idx[i]].skipped = true
					return nil
				}
				var rec sink.Record
				if err := decodeRecord(line, &rec); err != nil {
					return fmt.Errorf("%s: offset %d: %w", g.path, g.locs[i], err)
				}
				out[g.idx[i]].Record = &rec
				return nil
			})
		} else {
			err = sink.ReadRecordsAt(g.path, g.locs, func(i int, rec *sink.Record) error {
				out[g.idx[i]].Record = rec
				return nil
			})
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errPartMoved
		}
		if err != nil {
			return nil, err
		}
	}
	ix.mu.RLock()
	for k := range out {
		if r := &out[k]; r.Record != nil && r.HadErrors() {
			if ek := ix.errs[keyHash(r.Record.Key())]; ek != nil {
				r.Errors = ek.count
			}
		}
	}
	ix.mu.RUnlock()
	return out, nil
}

// Rows reads the entries at positions (see rows); a part that moved since
// the index was read makes it refresh the index and try once more.
func (ix *Index) Rows(positions []int32) ([]Row, error) { return ix.rowsKeep(positions, nil) }

// rowsKeep is Rows with rows' keep.
func (ix *Index) rowsKeep(positions []int32, keep func(line []byte) bool) ([]Row, error) {
	out, err := ix.rows(positions, keep)
	if errors.Is(err, errPartMoved) {
		if rerr := ix.refresh(false); rerr != nil {
			return nil, rerr
		}
		out, err = ix.rows(positions, keep)
	}
	return out, err
}

// Find is the position of the live entry of key k in directory dir (-1:
// every directory), or -1.
func (ix *Index) Find(dir int, k sink.Key) (int32, error) {
	h := uint32(keyHash(k))
	var cands []int32
	ix.mu.RLock()
	for i := 0; i < ix.n; i++ {
		b, j := ix.at(i)
		if b.key[j] == h && b.flags[j]&flagDead == 0 && (dir < 0 || ix.segs[b.loc[j]>>locBits].dir == dir) {
			cands = append(cands, int32(i))
		}
	}
	ix.mu.RUnlock()
	if len(cands) == 0 {
		return -1, nil
	}
	rows, err := ix.Rows(cands)
	if err != nil {
		return -1, err
	}
	for _, r := range rows {
		if r.ID() == k.ID && r.Sample() == k.Sample {
			return r.Pos, nil
		}
	}
	return -1, nil
}

// ErrorHistory is every error record of key k in dir, in the order they
// were written.
func ErrorHistory(dir string, k sink.Key) ([]sink.ErrorRecord, error) {
	var out []sink.ErrorRecord
	err := sink.ForEachError(dir, func(e *sink.ErrorRecord) error {
		if e.Key() == k {
			out = append(out, *e)
		}
		return nil
	})
	return out, err
}
