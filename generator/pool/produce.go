package pool

// The producer: it reads the dataset and alone decides which keys are
// asked (not those the directory held, nor a key this run asked already).

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/keyset"
)

// produce hands jobs to start until the Source ends (ended), Drain is
// called or ctx ends. start blocks while the pool is full. It alone decides
// whether a key is asked: not when the directory held it (done, or failed
// and errors are not retried), nor when an earlier row of this pass had its
// id (a repeated id: a bad row, which the Source reports).
func (e *Engine) produce(ctx context.Context, src Source, out Output, start func(task)) (ended bool, err error) {
	held := out.Recovered()
	asked := askedKeys{all: !e.opts.UniqueIDs, visits: held.Visits()}
	if ss, ok := out.(seenSink); ok {
		asked.seen, asked.pending = ss.Seen, &e.pending
	}
	countBad, reports, unhook := e.hook(src, &asked, held)
	defer unhook()
	notedModel := false
	win := window{}
	if e.opts.LongestFirst {
		win.size = longestWindow * e.opts.Concurrency
	}
	for {
		if e.draining() || ctx.Err() != nil {
			return false, nil // rows in the window are left unasked: nothing was recorded for them
		}
		p, err := src.Next()
		countBad()
		if errors.Is(err, io.EOF) {
			for win.Len() > 0 {
				if !e.startRow(ctx, heap.Pop(&win).(dataset.Prompt), held, &asked, true, start) {
					return false, nil
				}
			}
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read dataset: %w", err)
		}
		byIndex := asked.byIndex(p)
		if !reports && e.repeatRow(&asked, p.ID, p.Index) {
			// A Source that cannot report it: the repeat is counted as a
			// bad row all the same, out of the run's total.
			e.stats.AddBadRows(1, int64(e.opts.Sampling.Samples))
			e.stats.AddRepeated(1)
			continue
		}
		if p.Model != "" && p.Model != e.opts.Sampling.Model && !notedModel {
			notedModel = true
			fmt.Fprintf(e.opts.Log, "note: rows ask for model %q (first at %s); every request goes to %q, the one model the server serves (endpoint.model)\n",
				p.Model, p.Location, e.opts.Sampling.Model)
		}
		if win.size > 0 && byIndex && (p.Hint > 0 || win.Len() > 0) {
			// Held, the longest hint started first. Its row is marked
			// produced now, so that a later row's own id spelling its
			// index is a repeat in dataset order.
			asked.addRow(p.Index)
			if heap.Push(&win, p); win.Len() < win.size {
				continue
			}
			p = heap.Pop(&win).(dataset.Prompt)
		}
		if !e.startRow(ctx, p, held, &asked, byIndex, start) {
			return false, nil
		}
	}
}

// longestWindow is the window's size in concurrencies. The tail is set by
// the rows started while the longest answer runs, about concurrency x
// (longest / mean answer): 12x for answers of a mean 648 tokens capped at
// 8,192, as the seeds saw. A held row costs its prompt's memory
// (docs/decisions/2026-12-longest-first.md: 2x caught a sixth of the tail
// bench's excess, the whole job nine tenths).
const longestWindow = 16

// window holds rows with a length hint (Prompt.Hint) and starts the longest
// first, ties in dataset order (Options.LongestFirst): a long answer that
// starts late holds the job's last minutes with the servers less than
// full. size 0: off. Only rows whose id is their index are held, so that
// an id repeat cannot hide in it; a row without a hint goes straight
// through while it is empty.
type window struct {
	size int
	rows []dataset.Prompt
}

func (w *window) Len() int { return len(w.rows) }
func (w *window) Less(i, j int) bool {
	a, b := &w.rows[i], &w.rows[j]
	return a.Hint > b.Hint || (a.Hint == b.Hint && a.Index < b.Index)
}
func (w *window) Swap(i, j int) { w.rows[i], w.rows[j] = w.rows[j], w.rows[i] }
func (w *window) Push(x any)    { w.rows = append(w.rows, x.(dataset.Prompt)) }
func (w *window) Pop() any {
	n := len(w.rows) - 1
	p := w.rows[n]
	w.rows[n] = dataset.Prompt{}
	w.rows = w.rows[:n]
	return p
}

// hook sets src's hooks that the Source offers: a count of its bad rows
// (countBad takes what it skipped since into the stats), repeats reported
// as bad rows (reports), and rows passed over before they are decoded.
// unhook takes them off, then counts the last bad rows.
func (e *Engine) hook(src Source, asked *askedKeys, held sink.Recovered) (countBad func(), reports bool, unhook func()) {
	samples := int64(e.opts.Sampling.Samples)
	// Bad rows leave the run's total as the Source skips them.
	counter, _ := src.(badRowCounter)
	var bad int64
	countBad = func() {
		if counter == nil {
			return
		}
		if n := counter.Skipped(); n > bad {
			e.stats.AddBadRows(n-bad, (n-bad)*samples)
			bad = n
		}
	}
	rs, reports := src.(repeatSource)
	if reports {
		// The Source makes a repeat a bad row, with its file and line.
		rs.SetRepeat(func(id string, index int64, _ bool) bool {
			if e.repeatRow(asked, id, index) {
				e.stats.AddRepeated(1)
				return true
			}
			return false
		})
	}
	sk, skips := src.(skipper)
	if skips {
		// A row none of whose keys is asked is passed over before it is
		// decoded (with row-index ids, without reading it at all): a
		// resume costs what finding the line ends costs. id shares the
		// reader's buffer: skipRow only looks it up, never keeps it.
		sk.SetSkip(func(id string, index int64, _ bool) bool {
			return e.skipRow(asked, id, index, held)
		})
	}
	unhook = func() {
		if skips {
			sk.SetSkip(nil)
		}
		if reports {
			rs.SetRepeat(nil)
		}
		countBad()
	}
	return countBad, reports, unhook
}

// startRow starts a task for each of row p's samples not held already
// (done, or failed without --retry-errors); false: the run stops.
func (e *Engine) startRow(ctx context.Context, p dataset.Prompt, held sink.Recovered, asked *askedKeys, byIndex bool, start func(task)) bool {
	msgs := e.opts.Prompt.Messages(p.Messages)
	together := e.together(p)
	var first *task
	for s := range e.opts.Sampling.Samples {
		k := sink.Key{ID: p.ID, Sample: s}
		if held.Done(k) {
			e.stats.AddAlreadyDone(1)
			continue
		}
		if !e.opts.RetryErrors && held.Failed(k) {
			e.stats.AddAlreadyFailed(1)
			continue
		}
		if e.draining() || ctx.Err() != nil {
			if first != nil {
				start(*first) // its keys are pending: the worker says them unstarted
			}
			return false
		}
		pending := asked.add(k, byIndex)
		switch {
		case !together:
			start(task{prompt: p, sample: s, msgs: msgs, pending: pending})
		case first == nil:
			first = &task{prompt: p, sample: s, msgs: msgs, pending: pending}
		default:
			first.more = append(first.more, moreSample{sample: s, pending: pending})
			if len(first.more)+1 == wire.MaxChoices {
				start(*first)
				first = nil
			}
		}
	}
	if first != nil {
		start(*first)
	}
	if byIndex {
		asked.addRow(p.Index)
	}
	return true
}

// skipper is a Source that can pass over rows before decoding them
// (*dataset.Reader).
type skipper interface {
	SetSkip(dataset.SkipFunc)
}

// repeatSource is a Source that asks whether a row repeats an earlier
// row's id and then reports it as a bad row (*dataset.Reader).
type repeatSource interface {
	SetRepeat(dataset.RepeatFunc)
}

// badRowCounter is a Source that counts the bad rows it skipped
// (*dataset.Reader).
type badRowCounter interface {
	Skipped() int64
}

// repeatRow reports whether an earlier row of this pass had id: one of its
// keys was asked by this run, or held by the directory and visited by this
// pass already. It marks the held keys visited. A row skipRow looked at
// just before is not looked at again (its keys are marked already).
func (e *Engine) repeatRow(a *askedKeys, id string, index int64) bool {
	if a.examined == index+1 {
		a.examined = 0
		return a.examinedRepeat
	}
	byIndex := a.isIndex(id, index)
	for s := range e.opts.Sampling.Samples {
		k := sink.Key{ID: id, Sample: s}
		if a.repeated(k, byIndex) {
			return true
		}
		if _, _, before := a.visits.Visit(k); before {
			return true
		}
	}
	return false
}

// skipRow decides, before the row is decoded, whether none of its keys is
// asked; then it counts them as produce would have (done, failed) and the
// row is passed over. Any key to ask, or a repeated id (which the decoded
// row reports): nothing is counted, and the row is decoded.
func (e *Engine) skipRow(a *askedKeys, id string, index int64, held sink.Recovered) bool {
	byIndex := a.isIndex(id, index)
	var done, failed int
	ask, repeat := false, false
	for s := range e.opts.Sampling.Samples {
		k := sink.Key{ID: id, Sample: s}
		if a.repeated(k, byIndex) {
			repeat = true
			continue
		}
		d, f, before := a.visits.Visit(k)
		switch {
		case before:
			repeat = true
		case d:
			done++
		case f && !e.opts.RetryErrors:
			failed++
		default:
			ask = true
		}
	}
	if repeat || ask {
		// Decoded next: repeatRow answers for it from what was found here.
		a.examined, a.examinedRepeat = index+1, repeat
		return false
	}
	if done > 0 {
		e.stats.AddAlreadyDone(int64(done))
	}
	if failed > 0 {
		e.stats.AddAlreadyFailed(int64(failed))
	}
	if byIndex {
		a.addRow(index)
	}
	return true
}

// askedKeys are the keys a run asked (or found held), so that a key is
// written once although a repeated id may come after the first copy's record
// was written. Ids from an id column (all) are kept as keys. Without one, a
// row's id is its index, which no other row repeats, unless the row names its
// own (a batch request's custom_id): only those are kept as keys, and the
// rows whose id is their index as one bit each, in case a later row's
// custom_id spells an earlier row's index. A dataset of plain rows then costs
// a bit a row, not a key (ARCHITECTURE.md, "Measured decisions").
//
// With a sink that says what this run wrote (seen), a key is not kept
// here: it is pending while in flight (pending.go) and seen by the sink
// once recorded, so a string-id run holds its keys once, in the sink.
type askedKeys struct {
	all     bool
	keys    keyset.Set // without seen: 12 bytes a key, a bit for a decimal id (sink/keyset)
	seen    func(sink.Key) bool
	pending *pendingKeys
	// visits mark the keys the directory held as this pass meets them, so
	// that a second row with a held key's id is a repeat, not a key done.
	visits *sink.Visits
	// examined is 1 + the index of the row skipRow looked at and did not
	// pass over (0: none), examinedRepeat what it found.
	examined       int64
	examinedRepeat bool
	// own: a key that is not its row's index was asked (a custom_id, or
	// any id of an id column). Until then a row-index key cannot have been
	// asked before, and needs no look in pending or the sink.
	own  bool
	rows []uint64 // bit i: row i, whose id is its index, was produced
	buf  []byte
}

// byIndex says whether p's id is its row index (never, with an id column).
func (a *askedKeys) byIndex(p dataset.Prompt) bool { return a.isIndex(p.ID, p.Index) }

// isIndex says whether id spells index (never, with an id column).
func (a *askedKeys) isIndex(id string, index int64) bool {
	if a.all {
		return false
	}
	a.buf = strconv.AppendInt(a.buf[:0], index, 10)
	return string(a.buf) == id
}

func (a *askedKeys) repeated(k sink.Key, byIndex bool) bool {
	if a.seen != nil {
		// Pending first: the writer removes a key after the sink took its
		// record, so a key missing here is seen there.
		if (a.own || !byIndex) && (a.pending.has(k) || a.seen(k)) {
			return true
		}
	} else if a.keys.Has(k) {
		return true
	}
	if a.all || byIndex {
		return false
	}
	// A row's own id that spells a row index: asked when that row was.
	i, ok := rowIndex(k.ID)
	return ok && i/64 < uint64(len(a.rows)) && a.rows[i/64]&(1<<(i%64)) != 0
}

// add notes that k is asked, and reports whether it is pending (the
// writer must then remove it once its result is taken).
func (a *askedKeys) add(k sink.Key, byIndex bool) (pending bool) {
	switch {
	case byIndex:
		return false // addRow keeps the row
	case a.seen != nil:
		a.own = true
		a.pending.add(k)
		return true
	default:
		a.keys.Add(k)
		return false
	}
}

func (a *askedKeys) addRow(i int64) {
	w := int(i / 64)
	if w >= len(a.rows) {
		a.rows = append(a.rows, make([]uint64, w+1-len(a.rows))...)
	}
	a.rows[w] |= 1 << (i % 64)
}

// rowIndex reads id as a row index is written: decimal digits, no sign, no
// leading zero.
func rowIndex(id string) (uint64, bool) {
	if id == "" || len(id) > 19 || (id[0] == '0' && len(id) > 1) {
		return 0, false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}
