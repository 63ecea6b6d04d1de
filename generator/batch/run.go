package batch

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/durable"
)

// run takes batch e from its recorded state to its answers delivered:
// upload, create, poll, download, then the lines handed to their requests.
// resumed: e was read from the ledger, so a creation may have happened
// that the ledger does not hold, and the server is asked first.
func (b *Batcher) run(e *Entry, ids []string, resumed bool) {
	var why string
	if e.State != StateDownloaded {
		err := b.submit(e, resumed)
		if err == nil {
			why, err = b.poll(e)
		}
		if err != nil {
			if b.ctx.Err() != nil {
				return // the run ends: the next collects it
			}
			if errors.Is(err, errGone) {
				b.abandon(e, ids, err)
				return
			}
			if errors.Is(err, ErrStuck) {
				// Its rows are answered at the provider: no error records;
				// the run ends, the ledger keeping the batch submitted.
				b.say(e, "%v", err)
				b.stop(err)
				return
			}
			b.say(e, "failed: %v", err)
			if e.BatchID == "" {
				_ = b.l.move(e, StateAbandoned, nil)
			}
			b.failAll(ids, "batch: "+err.Error())
			return
		}
	}
	if err := b.collect(e, ids, why); err != nil {
		b.say(e, "%v", err)
		b.failAll(ids, "batch: "+err.Error())
	}
}

// goneTries is how many 404s in a row a batch's status gets before the
// batch is taken as lost by the provider (errGone).
const goneTries = 4

// errGone: the provider answers 404 for a batch it was given, every try.
var errGone = errors.New("the provider no longer knows batch")

// abandon records batch e abandoned, the provider having lost it, says so
// once, and asks its rows again in a new batch of this run: none of them
// was answered (its output was never downloaded), so none is an error.
func (b *Batcher) abandon(e *Entry, ids []string, why error) {
	input, _, _ := files(b.o.Dir, e.Number)
	lines, err := inputLines(input)
	if err == nil {
		err = b.l.move(e, StateAbandoned, nil)
	}
	if err != nil {
		b.say(e, "%v; and its abandonment could not be recorded: %v", why, err)
		b.failAll(ids, "batch: "+why.Error())
		return
	}
	b.say(e, "%v: abandoned in %s; its %d requests, never answered, go again in a new batch", why, LedgerName, len(ids))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		delete(b.known, id)
		if _, waits := b.waiters[id]; waits {
			b.addLine(id, lines[id])
		}
	}
	b.maybeSeal()
}

func (b *Batcher) say(e *Entry, format string, args ...any) {
	fmt.Fprintf(b.o.Log, "batch %d: %s\n", e.Number, fmt.Sprintf(format, args...))
}

// retry calls f until it succeeds, fails for good, or the run ends,
// waiting between tries from a second, doubling, up to the poll interval.
func (b *Batcher) retry(f func() error) error {
	p := backoff.Policy{Initial: time.Second, Max: max(b.o.PollInterval, time.Second)}
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !Transient(err) || b.ctx.Err() != nil {
			return err
		}
		select {
		case <-b.ctx.Done():
			return b.ctx.Err()
		case <-b.o.After(p.Ceiling(attempt)):
		}
	}
}

// submit uploads e's input file and creates its batch, recording each id
// as it comes. Before any creation that may have happened unrecorded (a
// resumed entry, or a try whose answer was lost) the server's list is
// searched for the batch by its metadata.
func (b *Batcher) submit(e *Entry, resumed bool) error {
	sent := resumed && inCreation(e)
	input, _, _ := files(b.o.Dir, e.Number)
	if e.FileID == "" {
		var f File
		err := b.retry(func() error {
			r, err := os.Open(input)
			if err != nil {
				return err
			}
			defer r.Close()
			f, err = b.o.API.Upload(b.ctx, fmt.Sprintf("synthgen-%s-%06d.jsonl", b.l.f.Run, e.Number), r)
			return err
		})
		if err != nil {
			return err
		}
		if err := b.l.move(e, StateUploaded, func() { e.FileID = f.ID }); err != nil {
			return err
		}
		b.say(e, "uploaded as %s", f.ID)
	}
	if e.BatchID != "" {
		return nil
	}
	meta := b.l.meta(e.Number)
	maybe := resumed
	if sent {
		if err := b.settle(); err != nil {
			return err
		}
	}
	var got Batch
	err := b.retry(func() error {
		if maybe {
			bt, found, err := b.o.API.Find(b.ctx, meta)
			if err != nil || found {
				got = bt
				return err
			}
		}
		maybe = true
		var err error
		got, err = b.o.API.Create(b.ctx, e.FileID, b.o.Window, meta)
		return err
	})
	if err != nil {
		return err
	}
	if err := b.l.move(e, StateSubmitted, func() { e.BatchID, e.Status, e.Counts = got.ID, got.Status, got.Counts }); err != nil {
		return err
	}
	b.say(e, "submitted as %s (%s)", got.ID, got.Status)
	return nil
}

// createSettle is Options.Settle's default: how long after an earlier
// run's last ledger write its batch creations are taken to have reached
// the server's list. A run killed while its POST /batches was in flight
// may still have that batch made after it died: a resume that looked for
// it at once (a supervisor's restart comes within a second) would not
// find it, create it again, and have every row of it run and billed twice.
const createSettle = 10 * time.Second

// inCreation says e's creation may have been sent unrecorded: its file id
// is recorded, its batch id not.
func inCreation(e *Entry) bool { return e.FileID != "" && e.BatchID == "" }

// settle waits, before a resumed batch whose creation may have been sent
// is looked for, until Options.Settle has passed since the earlier run
// last wrote the ledger (the creation was sent after its entry was). The
// caller says so once for all of them, after its header (Settling).
func (b *Batcher) settle() error {
	wait := time.Until(b.settled())
	if wait <= 0 {
		return nil
	}
	select {
	case <-b.o.After(wait):
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

// poll waits for e's batch to end, recording its status and counts as
// they change, then downloads its output and error files. It returns what
// the batch says of the rows it did not answer.
func (b *Batcher) poll(e *Entry) (string, error) {
	for {
		var bt Batch
		gone := 0
		err := b.retry(func() (err error) {
			bt, err = b.o.API.Get(b.ctx, e.BatchID)
			if notFound(err) {
				// A 404 may be the provider's for a moment (a replica that
				// has not seen the batch yet): asked a few times more.
				if gone++; gone < goneTries {
					return tryAgain{err}
				}
				return fmt.Errorf("%w %s (404 on %d tries, the last: %w)", errGone, e.BatchID, gone, err)
			}
			return err
		})
		if err != nil {
			return "", err
		}
		if bt.Status != e.Status || bt.Counts != e.Counts {
			if err := b.l.update(func() { e.Status, e.Counts = bt.Status, bt.Counts }); err != nil {
				return "", err
			}
			b.say(e, "%s, %d of %d done, %d failed", bt.Status, bt.Counts.Completed, bt.Counts.Total, bt.Counts.Failed)
		}
		if bt.Ended() {
			return bt.why(), b.download(e, &bt)
		}
		select {
		case <-b.ctx.Done():
			return "", b.ctx.Err()
		case <-b.o.After(b.o.PollInterval):
		}
	}
}

// download writes the batch's output and error files to disk, each
// complete or not at all, then records the batch downloaded.
func (b *Batcher) download(e *Entry, bt *Batch) error {
	_, output, errs := files(b.o.Dir, e.Number)
	for _, f := range []struct{ id, path string }{{bt.OutputFileID, output}, {bt.ErrorFileID, errs}} {
		if f.id == "" {
			continue
		}
		if err := b.fetchPatiently(e, f.id, f.path); err != nil {
			return err
		}
	}
	return b.l.move(e, StateDownloaded, func() { e.OutputFileID, e.ErrorFileID = bt.OutputFileID, bt.ErrorFileID })
}

// Downloads that keep failing: said after sayAfter failures in a row,
// and given up (ErrStuck) once the waits between them pass outageBound,
// the time an endpoint may answer nothing but 429s before it is said to
// be out and a server still loading is waited for at start.
const (
	sayAfter    = 5
	outageBound = 10 * time.Minute
)

// ErrStuck is a batch whose output cannot be downloaded for outageBound:
// the run ends with it, the batch kept submitted in the ledger for the
// same command to collect later.
var ErrStuck = errors.New("cannot download")

// fetchPatiently downloads file id of e's batch to path as retry does,
// but says the failures once, after sayAfter of them, and gives up past
// outageBound of waits (the run's clock, Options.After, is what passes).
func (b *Batcher) fetchPatiently(e *Entry, id, path string) error {
	p := backoff.Policy{Initial: time.Second, Max: max(b.o.PollInterval, time.Second)}
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		err := b.fetch(id, path)
		if err == nil || !Transient(err) || b.ctx.Err() != nil {
			return err
		}
		if waited >= outageBound {
			return fmt.Errorf("%w file %s of %s for %s (%d tries, the last: %w): the run stops; %s keeps the batch, and the same command downloads it later", ErrStuck, id, e.BatchID, waited, attempt, err, LedgerName)
		}
		if attempt == sayAfter {
			b.say(e, "file %s of %s: %d downloads failed, the last: %v; trying again for up to %s", id, e.BatchID, attempt, err, outageBound)
		}
		d := p.Ceiling(attempt)
		waited += d
		select {
		case <-b.ctx.Done():
			return b.ctx.Err()
		case <-b.o.After(d):
		}
	}
}

func (b *Batcher) fetch(id, path string) error {
	f, err := durable.Create(path, 0o644)
	if err != nil {
		return err
	}
	if err := b.o.API.Content(b.ctx, id, f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// collect hands every line of e's downloaded files to its request; a
// request no line answers fails with why. A custom_id on several lines
// (in the output and the error file, or twice in one) keeps its answer
// over any failure. A malformed line costs that line only: it is said,
// named by file and line, and the files are kept past the run's end for
// a look; a file that cannot be read leaves the batch downloaded, for the
// next run to collect.
func (b *Batcher) collect(e *Entry, ids []string, why string) error {
	if why == "" {
		why = fmt.Sprintf("batch %s %s without this request's answer", e.BatchID, e.Status)
	}
	answered := make(map[string]bool, len(ids))
	failed := map[string]answer{} // the first failure of each custom_id not answered
	var bad []string
	dropped := 0 // answers no request took
	deliver := func(cid string, a answer) {
		a.batch = e.Number
		if !b.deliver(cid, a) {
			dropped++
		}
	}
	_, output, errs := files(b.o.Dir, e.Number)
	for _, p := range []string{output, errs} {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = readLines(f, p, func(cid string, a answer) {
				switch {
				case answered[cid]:
				case a.body != nil:
					answered[cid] = true
					delete(failed, cid)
					deliver(cid, a)
				default:
					if _, ok := failed[cid]; !ok {
						failed[cid] = a
					}
				}
			}, func(err error) {
				bad = append(bad, err.Error())
				b.say(e, "%v", err)
			})
			f.Close()
		}
		if err != nil {
			b.mu.Lock()
			b.keep[e.Number] = keepDownloaded
			b.mu.Unlock()
			return fmt.Errorf("collecting: %w (kept downloaded: --retry-errors collects it without sending its rows again)", err)
		}
	}
	for cid, a := range failed {
		deliver(cid, a)
	}
	if len(bad) > 0 {
		why = fmt.Sprintf("%s (%d malformed lines in its files, the first %s)", why, len(bad), bad[0])
		b.mu.Lock()
		b.keep[e.Number] = keepFiles
		b.mu.Unlock()
	}
	var missing []string
	for _, id := range ids {
		if _, ok := failed[id]; !ok && !answered[id] {
			missing = append(missing, id)
		}
	}
	for _, id := range missing {
		deliver(id, answer{fail: why})
	}
	if dropped == 0 {
		b.mu.Lock()
		b.handed[e.Number] = true
		b.mu.Unlock()
	}
	b.say(e, "collected: %d answers, %d failed, %d without a line, %d malformed lines", len(answered), len(failed), len(missing), len(bad))
	if dropped > 0 {
		b.say(e, "%d answers found no request waiting (the run ending): kept downloaded, the next run writes them", dropped)
	}
	return nil
}
