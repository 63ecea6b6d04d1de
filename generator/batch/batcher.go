package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/synthgen/synthgen/generator/pool"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink/layout"
)

// Options configure a Batcher.
type Options struct {
	API          *API
	Dir          string // the output directory
	MaxRequests  int    // lines a batch input file holds at most
	MaxBytes     int64  // bytes a batch input file holds at most
	PollInterval time.Duration
	Window       string // completion_window
	// Slots is the pool's concurrency, Left the keys of the run neither
	// done nor failed yet, InFlight those holding a slot: the open batch
	// is submitted, however few lines it holds, once every slot waits for
	// a batch, or every key left does, or intake has stopped (Drain) and
	// every key in flight does.
	Slots    int
	Left     func() int64
	InFlight func() int64
	// After is the clock of the waits between polls and of the settle
	// before a resumed batch is looked for; nil: time.After.
	After func(time.Duration) <-chan time.Time
	// Settle is how long after an earlier run's last ledger write its
	// batch creations are taken to have reached the server's list (a
	// resumed batch whose creation may have been sent is looked for only
	// then); 0: 10 s. The tests shorten it.
	Settle time.Duration
	Log    io.Writer // a line at each batch's step; nil: discarded
	// OnChange is given a copy of every batch each time the ledger is
	// saved, and once at Open (nil: not told): the progress line and
	// status.json show them. It is called with the ledger's lock held, so
	// it must not call the Batcher.
	OnChange func([]Entry)
	// Moved is given a copy of a batch once its new state is on disk (its
	// entry added, intended, or moved), in the goroutine that moved it and
	// before that goroutine takes its next step, no lock held; nil: not
	// told. The tests stop a run there, as a kill right after that write.
	Moved func(Entry)
}

// keep is what Close leaves of a downloaded batch whose collection did
// not go cleanly.
type keep int

const (
	// keepFiles: collected, but some lines were malformed; its files stay
	// for a look at them.
	keepFiles keep = iota + 1
	// keepDownloaded: its files could not be read; it stays downloaded,
	// files and all, for a later run to collect.
	keepDownloaded
)

// Batcher is the pool's Completer in the batch mode: each request becomes
// a line of the open batch, and waits for its answer in the batch's output.
type Batcher struct {
	o Options
	l *ledger

	mu      sync.Mutex
	open    bytes.Buffer // the open batch's lines
	openIDs []string
	waiters map[string]chan answer // requests waiting, by custom_id
	ready   map[string]answer      // answers that came before their request
	known   map[string]bool        // custom_ids in a recorded batch not yet answered
	ended   bool                   // intake has stopped
	resumed int                    // batches an earlier run left, collected from Open on
	// lastWrite is when an earlier run last wrote the ledger, as Open
	// found it (zero: none), and settling how many of its batches it may
	// have been creating: see settle.
	lastWrite time.Time
	settling  int
	keep      map[int]keep // batches whose collection left something to look at
	// handed: downloaded batches each of whose answers went to its
	// request; only these are marked collected by Close.
	handed map[int]bool
	// untaken: batches an answer of which came to a request as it gave
	// up waiting (Complete): never marked collected by this run.
	untaken map[int]bool

	recording sync.Mutex // one batch recorded at a time (record)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stopped chan error // the first error that ends the run (Stopped), buffered 1
}

// Stopped brings the error a batch ends the run with (ErrStuck): the
// caller stops the run and returns it. It comes once, if ever.
func (b *Batcher) Stopped() <-chan error { return b.stopped }

// stop hands err to Stopped, unless an earlier error is there.
func (b *Batcher) stop(err error) {
	select {
	case b.stopped <- err:
	default:
	}
}

var _ pool.Completer = (*Batcher)(nil)

// Open reads DIR/batches.json and starts collecting every batch an
// earlier run left uncollected, whose requests then wait for it rather
// than being sent again.
func Open(o Options) (*Batcher, error) {
	if o.After == nil {
		o.After = time.After
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Settle <= 0 {
		o.Settle = createSettle
	}
	l, err := openLedger(o.Dir)
	if err != nil {
		return nil, err
	}
	l.onChange, l.moved = o.OnChange, o.Moved
	l.tellNow()
	var lastWrite time.Time // the ledger's: no earlier run's create was sent after it
	if fi, err := os.Stat(l.path); err == nil {
		// A file server whose clock is ahead would otherwise make the
		// wait as long as its lead: Settle from now is the most.
		lastWrite = fi.ModTime()
		if now := time.Now(); lastWrite.After(now) {
			lastWrite = now
		}
	}
	b := &Batcher{o: o, l: l, lastWrite: lastWrite, waiters: map[string]chan answer{}, ready: map[string]answer{}, known: map[string]bool{}, keep: map[int]keep{}, handed: map[int]bool{}, untaken: map[int]bool{},
		stopped: make(chan error, 1)}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	// Every entry's input is read before any goroutine starts: an entry
	// that cannot be read fails Open with nothing left running.
	var left []*Entry
	var leftIDs [][]string
	for _, e := range l.f.Batches {
		if e.State.Ended() {
			continue
		}
		ids, err := b.inputIDs(e)
		if err != nil {
			b.cancel()
			return nil, err
		}
		for _, id := range ids {
			b.known[id] = true
		}
		if inCreation(e) {
			b.settling++
		}
		left, leftIDs = append(left, e), append(leftIDs, ids)
	}
	for i, e := range left {
		ids := leftIDs[i]
		b.wg.Go(func() { b.run(e, ids, true) })
	}
	b.resumed = len(left)
	b.wg.Go(b.tick)
	return b, nil
}

func (b *Batcher) inputIDs(e *Entry) ([]string, error) {
	input, _, _ := files(b.o.Dir, e.Number)
	f, err := os.Open(input)
	if err != nil {
		return nil, fmt.Errorf("%s: batch %d (%s) has lost its input file: %w", LedgerName, e.Number, e.State, err)
	}
	defer f.Close()
	var ids []string
	err = inputIDs(f, input, func(id string) { ids = append(ids, id) })
	return ids, err
}

// Resumed is the number of batches an earlier run submitted that this
// one collects (said by the caller, after its own header).
func (b *Batcher) Resumed() int { return b.resumed }

// Settling is how many of those an earlier run may have been creating as
// it stopped, looked for in the server's list only once wait has passed
// (Options.Settle); said by the caller, after its own header.
func (b *Batcher) Settling() (n int, wait time.Duration) {
	return b.settling, max(0, time.Until(b.settled()))
}

// settled is when an earlier run's creations are taken to be in the
// server's list.
func (b *Batcher) settled() time.Time { return b.lastWrite.Add(b.o.Settle) }

// Drain says no new key will come: the open batch goes as soon as every
// key in flight waits.
func (b *Batcher) Drain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	b.maybeSeal()
}

// Complete is one request's answer, out of the batch its line went in.
func (b *Batcher) Complete(ctx context.Context, req wire.Request, _ func(int)) (wire.Response, error) {
	k, ok := pool.KeyOf(ctx)
	if !ok {
		return wire.Response{}, errors.New("batch: a request without its key (pool.Options.KeyedContext)")
	}
	cid := customID(k, len(req.Messages))
	b.mu.Lock()
	if a, ok := b.ready[cid]; ok {
		delete(b.ready, cid)
		delete(b.known, cid)
		b.mu.Unlock()
		return a.response()
	}
	ch := make(chan answer, 1)
	b.waiters[cid] = ch
	var err error
	if !b.known[cid] {
		err = b.add(cid, req)
	}
	b.maybeSeal()
	b.mu.Unlock()
	if err != nil {
		b.deliver(cid, answer{fail: err.Error()})
	}
	select {
	case a := <-ch:
		return a.response()
	case <-ctx.Done():
		b.mu.Lock()
		if b.waiters[cid] == ch {
			delete(b.waiters, cid)
		} else if a := <-ch; a.batch > 0 {
			// Its answer came as it gave up: that batch's answers are
			// not all written, so Close leaves it downloaded.
			b.untaken[a.batch] = true
		}
		b.mu.Unlock()
		return wire.Response{}, ctx.Err()
	}
}

func (a answer) response() (wire.Response, error) {
	if a.fail != "" {
		// A line the server refused as too long for the model's context
		// is too_long, as on the streaming path: never asked again, and
		// counted apart by the summary.
		e := &wire.Error{Status: a.status, Cause: wire.CauseBatch, Message: a.fail}
		wire.MarkTooLong(e, a.errBody)
		return wire.Response{}, e
	}
	r, err := wire.DecodeBody(a.body)
	if err != nil {
		msg := err.Error()
		if a.where != "" {
			msg = a.where + ": " + msg
		}
		return r, &wire.Error{Cause: wire.CauseBatch, Message: msg, Err: err}
	}
	return r, nil
}

// An input line is linePrefix, the custom_id (JSON), lineMiddle, the
// request's body, lineEnd.
const (
	linePrefix = `{"custom_id":`
	lineMiddle = `,"method":"POST","url":"` + lineURL + `","body":`
	lineEnd    = "}\n"
)

// add writes the request's line into the open batch, first sending the
// open batch if the line would take it past MaxBytes.
func (b *Batcher) add(cid string, req wire.Request) error {
	req.Stream = false
	body, err := wire.EncodeRequest(req)
	if err != nil {
		return err
	}
	id, _ := json.Marshal(cid)
	// The line's exact length: an input file is never over MaxBytes.
	n := int64(len(linePrefix) + len(id) + len(lineMiddle) + len(body) + len(lineEnd))
	if n > b.o.MaxBytes {
		return fmt.Errorf("the request's line (%d bytes) is over batch.max_bytes (%d)", n, b.o.MaxBytes)
	}
	var line bytes.Buffer
	line.Grow(int(n))
	line.WriteString(linePrefix)
	line.Write(id)
	line.WriteString(lineMiddle)
	line.Write(body)
	line.WriteString(lineEnd)
	b.addLine(cid, line.Bytes())
	return nil
}

// addLine writes a whole input line (its newline included) into the open
// batch, first sending the open batch if the line would take it past
// MaxBytes. b.mu is held.
func (b *Batcher) addLine(cid string, line []byte) {
	if int64(b.open.Len())+int64(len(line)) > b.o.MaxBytes {
		b.seal()
	}
	b.open.Write(line)
	b.openIDs = append(b.openIDs, cid)
	if len(b.openIDs) >= b.o.MaxRequests {
		b.seal()
	}
}

// maybeSeal sends the open batch when nothing more can join it soon: every
// slot waits, or the source has ended and every key in flight waits.
func (b *Batcher) maybeSeal() {
	if len(b.openIDs) == 0 {
		return
	}
	w := len(b.waiters)
	if w >= b.o.Slots || int64(w) >= b.o.Left() || (b.ended && int64(w) >= b.o.InFlight()) {
		b.seal()
	}
}

// seal hands the open batch to a goroutine that records it, its input
// file on disk and its entry in the ledger, both fsynced, and only then
// submits it. It is called with b.mu held, which every Complete takes: the
// buffer is handed over, not copied, and written outside the lock.
func (b *Batcher) seal() {
	ids := b.openIDs
	data := b.open.Bytes()
	b.openIDs, b.open = nil, bytes.Buffer{}
	b.wg.Go(func() {
		e, err := b.record(data, len(ids))
		if err != nil {
			b.failAll(ids, "batch: "+err.Error())
			return
		}
		b.l.told(e)
		fmt.Fprintf(b.o.Log, "batch %d: %d requests, %d bytes, recorded\n", e.Number, e.Requests, e.Bytes)
		b.run(e, ids, false)
	})
}

// record writes a batch's input file and adds its entry to the ledger;
// batches are recorded one at a time, so each file is its entry's number.
func (b *Batcher) record(data []byte, n int) (*Entry, error) {
	b.recording.Lock()
	defer b.recording.Unlock()
	input, _, _ := files(b.o.Dir, b.l.next())
	if err := durable.MkdirAll(layout.Dir(b.o.Dir).BatchFiles()); err != nil {
		return nil, err
	}
	if err := durable.WriteFile(input, data, 0o644); err != nil {
		return nil, err
	}
	return b.l.add(n, int64(len(data)))
}

// deliver hands a line's answer to its request, or keeps it for the
// request to come; false when neither (the request has given up waiting,
// its run ending): the answer is only on disk.
func (b *Batcher) deliver(cid string, a answer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.waiters[cid]; ok {
		delete(b.waiters, cid)
		delete(b.known, cid)
		ch <- a
		return true
	}
	if b.known[cid] {
		b.ready[cid] = a
		return true
	}
	return false
}

func (b *Batcher) failAll(ids []string, why string) {
	for _, id := range ids {
		b.deliver(id, answer{fail: why})
	}
}

// tick looks every second whether the open batch should go: a key that
// left its slot may have been what kept it.
func (b *Batcher) tick() {
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.o.After(time.Second):
		}
		b.mu.Lock()
		b.maybeSeal()
		b.mu.Unlock()
	}
}

// Close stops the batches' goroutines (a batch still running server-side
// is collected by the next run). With clean, the run's records are all on
// disk: every downloaded batch is marked collected and its files removed.
func (b *Batcher) Close(clean bool) error {
	b.cancel()
	b.wg.Wait()
	var out []string
	for _, e := range b.l.f.Batches {
		if e.State == StateSubmitted {
			out = append(out, e.BatchID)
		}
	}
	if len(out) > 0 {
		fmt.Fprintf(b.o.Log, "batch: %d batches left at the provider (%s); the same command collects them, without sending their rows again\n", len(out), strings.Join(out, ", "))
	}
	if !clean {
		return nil
	}
	for _, e := range b.l.f.Batches {
		if e.State != StateDownloaded || b.keep[e.Number] == keepDownloaded || !b.handed[e.Number] || b.untaken[e.Number] {
			continue // its answers are on disk only: the next run collects them
		}
		if err := b.l.move(e, StateCollected, nil); err != nil {
			return err
		}
		if b.keep[e.Number] == keepFiles {
			fmt.Fprintf(b.o.Log, "batch %d: its files kept in %s for the malformed lines named above\n", e.Number, filepath.Join(b.o.Dir, FilesDir))
			continue
		}
		for _, p := range pathsOf(b.o.Dir, e.Number) {
			_ = os.Remove(p)
		}
	}
	return nil
}

func pathsOf(dir string, n int) []string {
	a, c, d := files(dir, n)
	return []string{a, c, d}
}
