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
	"slices"
	"strconv"
	"sync"

	"github.com/synthgen/synthgen/internal/durable"
)

// LedgerName is the file beside manifest.json that records every batch
// the directory's runs intended, and FilesDir the directory of their
// input and output files.
const (
	LedgerName = "batches.json"
	FilesDir   = "batches"
)

// The states of a batch, in order. A batch is recorded intended (its
// input file on disk, naming its requests' custom_ids) before anything is
// sent; then with its file id once uploaded, its batch id once created,
// downloaded once its output and error files are on disk, and collected
// once its answers are records.
type State string

const (
	StateIntended   State = "intended"
	StateUploaded   State = "uploaded"
	StateSubmitted  State = "submitted"
	StateDownloaded State = "downloaded"
	StateCollected  State = "collected"
	// StateAbandoned: given up before the server took it (its upload or
	// creation refused); its rows were error records.
	StateAbandoned State = "abandoned"
)

// nextStates are the states each may move to; collected and abandoned
// are the ends. A resumed intended batch may have been uploaded and
// created unrecorded: it is uploaded again and found by its metadata, so
// it still moves one step at a time.
var nextStates = map[State][]State{
	StateIntended:   {StateUploaded, StateAbandoned},
	StateUploaded:   {StateSubmitted, StateAbandoned},
	StateSubmitted:  {StateDownloaded},
	StateDownloaded: {StateCollected},
}

// CanMove says whether a batch in state s may move to state to.
func (s State) CanMove(to State) bool { return slices.Contains(nextStates[s], to) }

// Ended says the batch needs nothing more: collected, or abandoned.
func (s State) Ended() bool { return s == StateCollected || s == StateAbandoned }

// Entry is one batch in the ledger.
type Entry struct {
	Number       int    `json:"number"`
	State        State  `json:"state"`
	Requests     int    `json:"requests"`
	Bytes        int64  `json:"bytes"`
	FileID       string `json:"input_file_id,omitempty"`
	BatchID      string `json:"batch_id,omitempty"`
	Status       string `json:"status,omitempty"` // the server's
	Counts       Counts `json:"request_counts"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`
}

// ledgerFile is DIR/batches.json.
type ledgerFile struct {
	Version int      `json:"version"`
	Run     string   `json:"run"` // the directory's id in each batch's metadata
	Batches []*Entry `json:"batches"`
}

// ledger is batches.json in memory; every change is rewritten atomically
// (temporary file, fsync, rename, fsync of the directory) before the step
// it records is taken.
type ledger struct {
	mu       sync.Mutex
	path     string
	f        ledgerFile
	onChange func([]Entry) // Options.OnChange
}

func openLedger(dir string) (*ledger, error) {
	l := &ledger{path: filepath.Join(dir, LedgerName)}
	// A kill leaves the temporary file of a rewrite or a download: the
	// file it was to replace is whole, or was never there.
	for _, pat := range []string{filepath.Join(dir, "."+LedgerName+".*.tmp"), filepath.Join(dir, FilesDir, ".*.tmp")} {
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

// ReadLedger reads DIR/batches.json, for a reader beside the run (the
// view); an error wrapping fs.ErrNotExist when the directory has none.
func ReadLedger(dir string) ([]Entry, error) {
	f, err := readLedger(filepath.Join(dir, LedgerName))
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(f.Batches))
	for i, e := range f.Batches {
		out[i] = *e
	}
	return out, nil
}

func readLedger(path string) (ledgerFile, error) {
	var f ledgerFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version != 1 || f.Run == "" {
		return f, fmt.Errorf("%s: version %d, run %q: not a ledger this synthgen reads", path, f.Version, f.Run)
	}
	for i, e := range f.Batches {
		if e == nil || e.Number != i+1 {
			return f, fmt.Errorf("%s: batch %d is out of order", path, i+1)
		}
		if _, ok := nextStates[e.State]; !ok && !e.State.Ended() {
			return f, fmt.Errorf("%s: batch %d: state %q is none of a batch's", path, i+1, e.State)
		}
	}
	return f, nil
}

// move takes e to state to, with the other changes of that step, and saves
// the ledger; a move the states do not allow is refused, the ledger as it
// was.
func (l *ledger) move(e *Entry, to State, change func()) error {
	if from := e.State; !from.CanMove(to) {
		return fmt.Errorf("%s: batch %d cannot go from %s to %s", LedgerName, e.Number, from, to)
	}
	return l.update(func() {
		e.State = to
		if change != nil {
			change()
		}
	})
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

// told tells Options.OnChange the batches as they are now.
func (l *ledger) told() {
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
	base := filepath.Join(dir, FilesDir, fmt.Sprintf("%06d", n))
	return base + ".input.jsonl", base + ".output.jsonl", base + ".error.jsonl"
}
