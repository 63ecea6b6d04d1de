package view

// Reading a directory into the index: its error records, and its data
// parts from where the last refresh left them (a part growing, renamed
// final, or converted from its journal).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// refreshErrors reads DIR/errors again when a file of it changed.
func (ix *Index) refreshErrors(d int, dir string) error {
	errDir := layout.Dir(dir).Errors()
	state, err := errorsState(errDir)
	if err != nil {
		return fmt.Errorf("view %s: %w", errDir, err)
	}
	if state == ix.errState[d] {
		return nil
	}
	type seen struct {
		last  sink.ErrorRecord
		count int
	}
	got := map[sink.Key]*seen{}
	var order []sink.Key
	err = sink.ForEachError(dir, func(e *sink.ErrorRecord) error {
		k := e.Key()
		s := got[k]
		if s == nil {
			s = &seen{}
			got[k] = s
			order = append(order, k)
		}
		s.last, s.count = *e, s.count+1
		if len(s.last.Message) > 4<<10 {
			s.last.Message = s.last.Message[:4<<10]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("view %s: %w", errDir, err)
	}
	// A key new here may have a record already (a refresh: the record
	// came first): its candidates by the hash's low bits are read to tell.
	ix.mu.RLock()
	var fresh []sink.Key
	for _, k := range order {
		if ix.errs[keyHash(k)] == nil {
			fresh = append(fresh, k)
		}
	}
	answered := map[sink.Key]bool{}
	if ix.n > 0 && len(fresh) > 0 {
		want := map[uint32][]sink.Key{}
		for _, k := range fresh {
			h := uint32(keyHash(k))
			want[h] = append(want[h], k)
		}
		var cands []int32
		for i := 0; i < ix.n; i++ {
			b, j := ix.at(i)
			if b.flags[j]&(flagDead|flagFailed) == 0 && want[b.key[j]] != nil {
				cands = append(cands, int32(i))
			}
		}
		ix.mu.RUnlock()
		rows, _ := ix.rows(cands, nil)
		for _, r := range rows {
			if r.Record != nil {
				answered[r.Record.Key()] = true
			}
		}
	} else {
		ix.mu.RUnlock()
	}

	ix.mu.Lock()
	defer ix.mu.Unlock()
	var add []entry
	for _, k := range order {
		s := got[k]
		h := keyHash(k)
		ek := ix.errs[h]
		if ek == nil {
			ek = &errKey{dir: d, entry: -1, answered: answered[k]}
			ix.errs[h] = ek
			if !ek.answered {
				ix.errKeys = append(ix.errKeys, ek)
				add = append(add, entry{
					loc: uint64(ix.errSeg[d])<<locBits | uint64(len(ix.errKeys)-1), hash: h,
					finish: "error: " + s.last.Cause, flags: flagFailed, errKeyIndex: len(ix.errKeys) - 1,
				})
			}
		}
		ek.last, ek.count = s.last, s.count
		if ek.entry >= 0 {
			b, j := ix.at(int(ek.entry))
			b.finish[j] = ix.finishCodeLocked("error: " + s.last.Cause)
		}
	}
	ix.appendLocked(add)
	ix.errState[d] = state
	return nil
}

// refreshData reads the parts of directory d that are new or grew.
func (ix *Index) refreshData(d int, dir string, files []dataFile, first bool) error {
	dataDir := layout.Dir(dir).Data()
	listed := map[string]bool{}
	var errs []error
	for _, f := range files {
		listed[f.name] = true
		ix.mu.RLock()
		s, known := ix.segOf[segName(d, f.name)]
		var seg segment
		if known {
			seg = *ix.segs[s]
		}
		prev, hadTemp := -1, false
		if !known && f.final() {
			for _, suffix := range []string{sink.SuffixOpen, sink.SuffixJournal} {
				if t, ok := ix.segOf[segName(d, f.name+suffix)]; ok && !ix.segs[t].dead {
					prev, hadTemp, seg = t, true, *ix.segs[t]
				}
			}
		}
		ix.mu.RUnlock()
		path := filepath.Join(dataDir, f.name)
		switch {
		case known && f.final() && f.size == seg.size && f.mod.Equal(seg.mod),
			known && !f.final() && f.size == seg.read:
			continue // read in full, or not grown
		case known && !f.final() && f.size >= seg.read:
			if err := ix.readSegment(s, path, f, seg.read, first); err != nil {
				errs = append(errs, err)
			}
			continue
		case known:
			// A final part that changed, or a temporary that shrank (a
			// recovery cut its torn tail): read it again from the start.
			ix.mu.Lock()
			ix.killLocked(s)
			delete(ix.segOf, segName(d, f.name))
			ix.mu.Unlock()
		case hadTemp && sink.Lines(f.name) && f.size >= seg.read:
			// .open renamed: the same bytes, read on from where they were.
			ix.mu.Lock()
			delete(ix.segOf, segName(d, ix.segs[prev].name))
			ix.segs[prev].name, ix.segs[prev].final = f.name, true
			ix.segOf[segName(d, f.name)] = prev
			ix.version++
			ix.mu.Unlock()
			if err := ix.readSegment(prev, path, f, seg.read, first); err != nil {
				errs = append(errs, err)
			}
			continue
		case hadTemp && !sink.Lines(f.name):
			// The journal converted: its lines are the part's first rows.
			ix.mu.Lock()
			rows := int64(ix.segs[prev].rows)
			ix.relabelLocked(prev)
			delete(ix.segOf, segName(d, ix.segs[prev].name))
			ix.segs[prev].name, ix.segs[prev].final, ix.segs[prev].lines = f.name, true, false
			ix.segs[prev].read = rows
			ix.segOf[segName(d, f.name)] = prev
			ix.mu.Unlock()
			if err := ix.readSegment(prev, path, f, rows, first); err != nil {
				errs = append(errs, err)
			}
			continue
		case hadTemp:
			ix.mu.Lock()
			ix.killLocked(prev)
			delete(ix.segOf, segName(d, ix.segs[prev].name))
			ix.mu.Unlock()
		}
		ix.mu.Lock()
		if len(ix.segs) >= maxSegs {
			ix.mu.Unlock()
			return fmt.Errorf("view %s: more than %d parts", dir, maxSegs)
		}
		s = len(ix.segs)
		ix.segs = append(ix.segs, &segment{dir: d, name: f.name, lines: sink.Lines(f.name), final: f.final()})
		ix.segOf[segName(d, f.name)] = s
		ix.mu.Unlock()
		if err := ix.readSegment(s, path, f, 0, first); err != nil {
			errs = append(errs, err)
		}
	}
	// A temporary gone without its final part (moved away): its records
	// no longer count.
	ix.mu.Lock()
	for name, s := range ix.segOf {
		if ix.segs[s].dir == d && !listed[ix.segs[s].name] {
			ix.killLocked(s)
			delete(ix.segOf, name)
		}
	}
	ix.mu.Unlock()
	return errors.Join(errs...)
}

func segName(d int, name string) string { return strconv.Itoa(d) + "/" + name }

// batchLen is how many entries a part's reading adds at a time.
const batchLen = 4096

// readSegment reads the records of segment s (the file f at path) from
// from (an offset, or a row), adding their entries.
func (ix *Index) readSegment(s int, path string, f dataFile, from int64, first bool) error {
	ix.mu.RLock()
	lines := ix.segs[s].lines
	ix.mu.RUnlock()
	var batch []entry
	flush := func() {
		ix.mu.Lock()
		ix.appendLocked(batch)
		ix.mu.Unlock()
		if first {
			ix.records.Add(int64(len(batch)))
		}
		batch = batch[:0]
	}
	var bad int
	var problem string
	var read int64
	var err error
	if !lines {
		row := int64(0)
		err = sink.ForEachRecord(path, func(rec *sink.Record, _ sink.Span) error {
			if row >= from {
				batch = append(batch, entryOf(rec, s, row))
				if len(batch) == batchLen {
					flush()
				}
			}
			row++
			return nil
		})
		read = row
		if first {
			ix.bytesRead.Add(f.size)
		}
	} else {
		read, bad, problem, err = eachLineFrom(path, from, func(rec *sink.Record, off int64, n int) {
			batch = append(batch, entryOf(rec, s, off))
			if len(batch) == batchLen {
				flush()
			}
			if first {
				ix.bytesRead.Add(int64(n))
			}
		})
	}
	flush()
	if errors.Is(err, fs.ErrNotExist) {
		return nil // finalized or moved since the listing: the next refresh sees what it became
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	seg := ix.segs[s]
	if err == nil {
		seg.read, seg.size, seg.mod = read, f.size, f.mod
	}
	seg.bad += bad
	if seg.problem == "" {
		seg.problem = problem
	}
	if err != nil {
		seg.problem = err.Error()
		return fmt.Errorf("view %s: %w", path, err)
	}
	return nil
}

// eachLineFrom calls fn for every record of the JSONL file path from byte
// from on, up to its last complete line, with the line's offset and its
// length with the newline; it stops at NUL bytes (a power loss's tail). A
// line that does not decode is counted (and the first named), not read. It
// returns where the complete lines end.
func eachLineFrom(path string, from int64, fn func(rec *sink.Record, off int64, n int)) (end int64, bad int, problem string, err error) {
	file, err := os.Open(path)
	if err != nil {
		return from, 0, "", err
	}
	defer file.Close()
	if _, err := file.Seek(from, 0); err != nil {
		return from, 0, "", err
	}
	off := from
	errNUL := errors.New("NUL")
	_, err = sink.ForEachLine(file, func(line []byte, n int) error {
		at := off
		off += int64(len(line)) + 1
		for _, c := range line {
			if c == 0 {
				off = at
				return errNUL
			}
		}
		var rec sink.Record
		if derr := decodeRecord(line, &rec); derr != nil {
			bad++
			if problem == "" {
				problem = fmt.Sprintf("%s: a line at byte %d does not decode: %v", filepath.Base(path), at, derr)
			}
			return nil
		}
		fn(&rec, at, len(line)+1)
		return nil
	})
	if errors.Is(err, errNUL) {
		err = nil
	}
	return off, bad, problem, err
}
