package view

// The index: one compact entry per record of the directories (38 bytes:
// store.go), built once, lazily (Start), then brought up to date with what a
// live run wrote since (Refresh). An entry holds what the table filters and
// sorts by and where the record is (its part and its offset or row), never
// the record's text: a page reads its records from the parts by location
// (sink.ReadRecordsAt).
//
// The records that count are the audit's (countedFiles). A part being
// filled (.open, .journal) is read up to its last complete line and read on
// from there at the next refresh; once finalized, its entries move to the
// final part: a JSONL part is the same bytes under its final name, a
// Parquet part holds the journal's lines as rows in the same order. A part
// that changed otherwise is read again (its old entries are marked dead).
//
// The keys that failed for good (an error record, no record) are entries
// too (flagFailed), as are, through flagErrHistory, the records of keys
// that failed before and were answered later; their error records are kept
// whole (errKey), as error records are few.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/synthgen/synthgen/sink"
)

// Entry flags.
const (
	flagTruncated   = 1 << iota // finish_reason "length": cut at max_tokens
	flagNoReasoning             // no reasoning
	flagThinkTags               // <think> or </think> in content
	flagErrHistory              // its key has error records: failed before, answered later
	flagFailed                  // no record: a key that failed for good (its error record)
	flagDead                    // read again elsewhere (a part finalized or changed), or an error answered since
)

// maxFinish is how many distinct finish reasons the index names; more
// (a server sending anything) read as finishOther.
const (
	maxFinish    = 250
	finishOther  = "(other)"
	maxNameBytes = 64 // a finish reason or an error cause is cut to this many bytes
)

// segment is one file whose records are entries: a data part, or (name
// "") the error records of a directory.
type segment struct {
	dir     int
	name    string // under DIR/data; "" for DIR/errors
	format  string // what a location is: sink.FormatJSONL (an offset) or sink.FormatParquet (a row)
	final   bool
	read    int64 // JSONL: bytes of complete lines read; Parquet: rows
	size    int64 // the file when read
	mod     time.Time
	rows    int // entries
	dead    bool
	bad     int    // lines that did not decode
	problem string // the first of them, for the page
}

// errKey is a key with error records in DIR/errors.
type errKey struct {
	last     sink.ErrorRecord // its latest
	dir      int
	count    int   // error records
	entry    int32 // its flagFailed entry while no record answers it; -1: none
	answered bool  // a record answers it
}

// Progress is how far the first build is.
type Progress struct {
	Started   bool          `json:"started"`
	Ready     bool          `json:"ready"`
	Error     string        `json:"error,omitempty"`
	BytesRead int64         `json:"bytes_read"`
	Bytes     int64         `json:"bytes"`
	Records   int64         `json:"records"`
	Took      time.Duration `json:"took_ns,omitempty"`
}

// Percent is how much of the bytes the build has read, 0..100.
func (p Progress) Percent() float64 {
	if p.Bytes <= 0 {
		return 0
	}
	return min(100, 100*float64(p.BytesRead)/float64(p.Bytes))
}

// Index is the index of a set of output directories. Safe for concurrent
// use: readers share it, a refresh appends to it.
type Index struct {
	dirs []string

	mu       sync.RWMutex
	blocks   []*block
	frees    []func()
	n        int // entries
	segs     []*segment
	segOf    map[string]int // dir index + "/" + name -> segment
	errSeg   []int          // per directory: the segment of its flagFailed entries
	finish   []string       // finish reasons by code
	finCode  map[string]uint8
	errs     map[uint64]*errKey // by keyHash
	errKeys  []*errKey          // by the location of a flagFailed entry
	errState []string           // per directory: errorsState when last read
	version  uint64             // changes with every change of the entries

	started   atomic.Bool
	done      chan struct{} // closed when the first build ended
	buildErr  error         // set before done is closed
	bytes     atomic.Int64  // of the first build
	bytesRead atomic.Int64
	records   atomic.Int64
	took      atomic.Int64

	// buildGate, when set (tests), holds the first build after it listed
	// the files, until it is closed.
	buildGate chan struct{}

	refreshMu   sync.Mutex // one refresh at a time
	lastRefresh time.Time  // under refreshMu

	cacheMu sync.Mutex
	sel     *selection
	dist    *Dist
}

// NewIndex is the (empty, not started) index of dirs.
func NewIndex(dirs []string) *Index {
	ix := &Index{
		dirs:     dirs,
		segOf:    map[string]int{},
		finCode:  map[string]uint8{},
		errs:     map[uint64]*errKey{},
		errState: make([]string, len(dirs)),
		done:     make(chan struct{}),
	}
	for d := range dirs {
		ix.errSeg = append(ix.errSeg, len(ix.segs))
		ix.segs = append(ix.segs, &segment{dir: d, final: true})
	}
	return ix
}

// Close releases the index's memory. The index is not used after.
func (ix *Index) Close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range ix.frees {
		f()
	}
	ix.blocks, ix.frees, ix.n = nil, nil, 0
}

// Start builds the index in the background, once; later calls do nothing.
func (ix *Index) Start() {
	if !ix.started.CompareAndSwap(false, true) {
		return
	}
	go func() {
		t0 := time.Now()
		err := ix.refresh(true)
		ix.took.Store(int64(time.Since(t0)))
		ix.buildErr = err
		close(ix.done)
	}()
}

// Wait starts the build and waits for it to end (or ctx).
func (ix *Index) Wait(ctx context.Context) error {
	ix.Start()
	select {
	case <-ix.done:
		return ix.buildErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitBuilt waits for the first build to end, without starting it (the
// build starts with the first page that needs it), or for ctx.
func (ix *Index) WaitBuilt(ctx context.Context) error {
	select {
	case <-ix.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready reports whether the first build ended.
func (ix *Index) Ready() bool {
	select {
	case <-ix.done:
		return true
	default:
		return false
	}
}

// Progress is the first build's.
func (ix *Index) Progress() Progress {
	p := Progress{Started: ix.started.Load(), Ready: ix.Ready(), Bytes: ix.bytes.Load(), BytesRead: ix.bytesRead.Load(),
		Records: ix.records.Load()}
	if p.Ready {
		p.Took = time.Duration(ix.took.Load())
		if ix.buildErr != nil {
			p.Error = ix.buildErr.Error()
		}
	}
	return p
}

// Refresh reads what the directories gained since the last refresh, at most
// once every every (a live run's parts grow; a finished run's do not, and a
// refresh then costs a listing). It does nothing before the first build
// ended.
func (ix *Index) Refresh(every time.Duration) error {
	if !ix.Ready() {
		return nil
	}
	ix.refreshMu.Lock()
	defer ix.refreshMu.Unlock()
	if time.Since(ix.lastRefresh) < every {
		return nil
	}
	return ix.refreshLocked(false)
}

// Len is the number of entries, dead ones included.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.n
}

// Version changes whenever the entries change.
func (ix *Index) Version() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.version
}

// keyHash is the hash a key is found by.
func keyHash(k sink.Key) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(k.ID)
	_, _ = d.Write([]byte{0})
	var buf [20]byte
	_, _ = d.Write(strconv.AppendInt(buf[:0], int64(k.Sample), 10))
	return d.Sum64()
}

// entry is one entry on its way into the blocks.
type entry struct {
	loc         uint64
	hash        uint64
	compl       uint32
	prompt      uint32
	lat, ttft   float32
	rlen, clen  uint32
	finish      string
	flags       uint8
	errKeyIndex int // flagFailed: index into errKeys
}

func clampU32(v int) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32))
}

// entryOf is the entry of rec at loc of segment seg. Lengths are in
// characters, over every turn of a whole conversation; the flags are the
// audit's (top-level fields).
func entryOf(rec *sink.Record, seg int, loc int64) entry {
	e := entry{
		loc:    uint64(seg)<<locBits | uint64(loc)&locMask,
		hash:   keyHash(rec.Key()),
		compl:  clampU32(rec.CompletionTokens),
		prompt: clampU32(rec.PromptTokens),
		lat:    float32(rec.LatencyMS),
		ttft:   float32(rec.TTFTMS),
		finish: rec.FinishReason,
	}
	if len(rec.Turns) == 0 {
		e.rlen = clampU32(utf8.RuneCountInString(rec.Reasoning))
		e.clen = clampU32(utf8.RuneCountInString(rec.Content))
	}
	for _, t := range rec.Turns {
		e.rlen += clampU32(utf8.RuneCountInString(t.Reasoning))
		e.clen += clampU32(utf8.RuneCountInString(t.Content))
	}
	if rec.FinishReason == "length" {
		e.flags |= flagTruncated
	}
	if rec.Reasoning == "" {
		e.flags |= flagNoReasoning
	}
	if sink.ThinkTags(rec.Content) {
		e.flags |= flagThinkTags
	}
	return e
}

// finishCodeLocked interns a finish reason (or an error's "error: cause").
func (ix *Index) finishCodeLocked(name string) uint8 {
	if len(name) > maxNameBytes {
		name = name[:maxNameBytes]
	}
	if c, ok := ix.finCode[name]; ok {
		return c
	}
	if len(ix.finish) >= maxFinish {
		name = finishOther
		if c, ok := ix.finCode[name]; ok {
			return c
		}
	}
	c := uint8(len(ix.finish))
	ix.finish = append(ix.finish, name)
	ix.finCode[name] = c
	return c
}

// appendLocked adds entries; a record whose key has error records is
// flagged, and answers its flagFailed entry.
func (ix *Index) appendLocked(es []entry) {
	for _, e := range es {
		if ix.n == len(ix.blocks)*blockLen {
			b, free := newBlock()
			ix.blocks = append(ix.blocks, b)
			ix.frees = append(ix.frees, free)
		}
		if e.flags&flagFailed == 0 {
			if ek := ix.errs[e.hash]; ek != nil {
				e.flags |= flagErrHistory
				ix.answerLocked(ek)
			}
		}
		b, j := ix.blocks[ix.n>>blockBits], ix.n&blockMask
		b.loc[j], b.key[j] = e.loc, uint32(e.hash)
		b.compl[j], b.prompt[j], b.lat[j], b.ttft[j] = e.compl, e.prompt, e.lat, e.ttft
		b.rlen[j], b.clen[j] = e.rlen, e.clen
		b.finish[j], b.flags[j] = ix.finishCodeLocked(e.finish), e.flags
		if e.flags&flagFailed != 0 {
			ix.errKeys[e.errKeyIndex].entry = int32(ix.n)
		}
		ix.n++
		ix.segs[e.loc>>locBits].rows++
	}
	ix.version++
}

// answerLocked marks ek answered by a record: its flagFailed entry is dead.
func (ix *Index) answerLocked(ek *errKey) {
	ek.answered = true
	if ek.entry >= 0 {
		ix.blocks[ek.entry>>blockBits].flags[ek.entry&blockMask] |= flagDead
		ek.entry = -1
	}
}

// at returns the block and slot of entry i.
func (ix *Index) at(i int) (*block, int) { return ix.blocks[i>>blockBits], i & blockMask }

// killLocked marks every entry of segment s dead.
func (ix *Index) killLocked(s int) {
	for i := 0; i < ix.n; i++ {
		if b, j := ix.at(i); int(b.loc[j]>>locBits) == s {
			b.flags[j] |= flagDead
		}
	}
	ix.segs[s].dead = true
	ix.version++
}

// relabelLocked makes the entries of segment s rows: the k-th entry of a
// journal is row k of the Parquet part it was converted into.
func (ix *Index) relabelLocked(s int) {
	k := uint64(0)
	for i := 0; i < ix.n; i++ {
		if b, j := ix.at(i); int(b.loc[j]>>locBits) == s && b.flags[j]&flagDead == 0 {
			b.loc[j] = uint64(s)<<locBits | k
			k++
		}
	}
	ix.version++
}

// refresh reads what is new in every directory: error records first (so
// that the records they precede are flagged), then the data parts. With
// first, it is the first build, whose progress Progress shows.
func (ix *Index) refresh(first bool) error {
	ix.refreshMu.Lock()
	defer ix.refreshMu.Unlock()
	return ix.refreshLocked(first)
}

// refreshLocked is refresh, under refreshMu.
func (ix *Index) refreshLocked(first bool) error {
	defer func() { ix.lastRefresh = time.Now() }()
	lists := make([][]dataFile, len(ix.dirs))
	for d, dir := range ix.dirs {
		files, err := countedFiles(filepath.Join(dir, "data"))
		if err != nil {
			return fmt.Errorf("view %s: %w", dir, err)
		}
		lists[d] = files
		if first {
			for _, f := range files {
				ix.bytes.Add(f.size)
			}
		}
	}
	if first && ix.buildGate != nil {
		<-ix.buildGate
	}
	var errs []error
	for d, dir := range ix.dirs {
		if err := ix.refreshErrors(d, dir); err != nil {
			errs = append(errs, err)
		}
	}
	for d, dir := range ix.dirs {
		if err := ix.refreshData(d, dir, lists[d], first); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// refreshErrors reads DIR/errors again when a file of it changed.
func (ix *Index) refreshErrors(d int, dir string) error {
	errDir := filepath.Join(dir, "errors")
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
	dataDir := filepath.Join(dir, "data")
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
		case hadTemp && f.part.Format == sink.FormatJSONL && f.size >= seg.read:
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
		case hadTemp && f.part.Format == sink.FormatParquet:
			// The journal converted: its lines are the part's first rows.
			ix.mu.Lock()
			rows := int64(ix.segs[prev].rows)
			ix.relabelLocked(prev)
			delete(ix.segOf, segName(d, ix.segs[prev].name))
			ix.segs[prev].name, ix.segs[prev].final, ix.segs[prev].format = f.name, true, sink.FormatParquet
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
		format := sink.FormatJSONL
		if f.final() {
			format = f.part.Format
		}
		ix.segs = append(ix.segs, &segment{dir: d, name: f.name, format: format, final: f.final()})
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
	format := ix.segs[s].format
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
	if format == sink.FormatParquet {
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
