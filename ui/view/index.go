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
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// Entry flags.
const (
	flagTruncated   = 1 << iota // finish_reason "length": cut at max_tokens
	flagNoReasoning             // no reasoning
	flagThinkTags               // <think> or </think> in content
	flagErrHistory              // its key has error records: failed before, answered later
	flagFailed                  // no record: a key that failed for good (its error record)
	flagDead                    // read again elsewhere (a part finalized or changed), or an error answered since
	flagToolCalls               // the target called a tool, in its answer or any turn
	flagDiverged                // a whole conversation with tools left the row's (Divergence)
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
	lines   bool   // what a location is: a byte offset (sink.Lines), or a row
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
	if hasToolCalls(rec) {
		e.flags |= flagToolCalls
	}
	if rec.Divergence != nil {
		e.flags |= flagDiverged
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
		files, err := countedFiles(layout.Dir(dir).Data())
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
