package batch

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink/layout"
)

// LedgerName is the file beside manifest.json that records every batch
// the directory's runs intended, and FilesDir the directory of their
// input and output files.
const (
	LedgerName = layout.BatchesName
	FilesDir   = layout.BatchFilesName
)

// The states of a batch, in order (runfiles.BatchState: the view reads
// the ledger there).
type State = runfiles.BatchState

const (
	StateIntended   = runfiles.BatchIntended
	StateUploaded   = runfiles.BatchUploaded
	StateSubmitted  = runfiles.BatchSubmitted
	StateDownloaded = runfiles.BatchDownloaded
	StateCollected  = runfiles.BatchCollected
	StateAbandoned  = runfiles.BatchAbandoned
)

// Entry is one batch in the ledger; ledgerFile is DIR/batches.json. Their
// on-disk form lives in runfiles, where the view reads it.
type (
	Entry      = runfiles.BatchEntry
	ledgerFile = runfiles.BatchLedger
)

// ledger is batches.json in memory; every change is rewritten atomically
// (temporary file, fsync, rename, fsync of the directory) before the step
// it records is taken.
type ledger struct {
	mu       sync.Mutex
	path     string
	f        ledgerFile
	onChange func([]Entry) // Options.OnChange
	moved    func(Entry)   // Options.Moved
}

func openLedger(dir string) (*ledger, error) {
	l := &ledger{path: layout.Dir(dir).Batches()}
	// A kill leaves the temporary file of a rewrite or a download: the
	// file it was to replace is whole, or was never there.
	for _, pat := range []string{layout.Dir(dir).Leftovers(LedgerName), filepath.Join(layout.Dir(dir).BatchFiles(), ".*.tmp")} {
		temps, _ := filepath.Glob(pat)
		for _, p := range temps {
			if err := os.Remove(p); err != nil {
				return nil, err
			}
		}
	}
	f, err := readLedger(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var id [8]byte
		_, _ = rand.Read(id[:])
		l.f = ledgerFile{Version: 1, Run: hex.EncodeToString(id[:])}
		return l, nil
	case err != nil:
		return nil, err
	}
	l.f = f
	return l, nil
}

// ReadLedger reads DIR/batches.json, for a reader beside the run; an
// error wrapping fs.ErrNotExist when the directory has none.
func ReadLedger(dir string) ([]Entry, error) { return runfiles.ReadBatches(dir) }

func readLedger(path string) (ledgerFile, error) { return runfiles.ReadBatchLedger(path) }

// move takes e to state to, with the other changes of that step, and saves
// the ledger; a move the states do not allow is refused, the ledger as it
// was.
func (l *ledger) move(e *Entry, to State, change func()) error {
	if from := e.State; !from.CanMove(to) {
		return fmt.Errorf("%s: batch %d cannot go from %s to %s", LedgerName, e.Number, from, to)
	}
	err := l.update(func() {
		e.State = to
		if change != nil {
			change()
		}
	})
	if err == nil {
		l.told(e)
	}
	return err
}

// told tells Options.Moved that e's state is on disk; l.mu is not held.
func (l *ledger) told(e *Entry) {
	if l.moved != nil {
		l.moved(*e)
	}
}

// update changes e under the lock and saves the ledger.
func (l *ledger) update(change func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	change()
	b, err := json.MarshalIndent(&l.f, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(l.path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	l.tell()
	return nil
}

// tellNow tells Options.OnChange the batches as they are now.
func (l *ledger) tellNow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tell()
}

// tell is told with l.mu held.
func (l *ledger) tell() {
	if l.onChange != nil {
		l.onChange(l.copyEntries())
	}
}

// add records a new batch, intended, and returns it.
func (l *ledger) add(requests int, size int64) (*Entry, error) {
	var e *Entry
	err := l.update(func() {
		e = &Entry{Number: len(l.f.Batches) + 1, State: StateIntended, Requests: requests, Bytes: size}
		l.f.Batches = append(l.f.Batches, e)
	})
	return e, err
}

// next is the number the next batch gets.
func (l *ledger) next() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.f.Batches) + 1
}

// copyEntries is a copy of every batch, with l.mu held.
func (l *ledger) copyEntries() []Entry {
	out := make([]Entry, len(l.f.Batches))
	for i, e := range l.f.Batches {
		out[i] = *e
	}
	return out
}

// meta is the metadata batch n is created with, by which a resume finds
// it on the server when its creation may have happened unrecorded.
func (l *ledger) meta(n int) map[string]string {
	return map[string]string{"synthgen_run": l.f.Run, "synthgen_batch": strconv.Itoa(n)}
}

// files are batch n's input, output and error files.
func files(dir string, n int) (input, output, errs string) {
	base := filepath.Join(layout.Dir(dir).BatchFiles(), fmt.Sprintf("%06d", n))
	return base + ".input.jsonl", base + ".output.jsonl", base + ".error.jsonl"
}
