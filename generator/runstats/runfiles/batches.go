package runfiles

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/synthgen/synthgen/sink/layout"
)

// The batch mode's ledger on disk, DIR/batches.json: its writer is package
// batch, which rewrites it atomically before each step it records; its
// readers (the view) read it here, beside the run's other files, without
// importing the batch machinery.

// BatchState is where a batch is, in order. A batch is recorded intended
// (its input file on disk, naming its requests' custom_ids) before
// anything is sent; then with its file id once uploaded, its batch id once
// created, downloaded once its output and error files are on disk, and
// collected once its answers are records.
type BatchState string

const (
	BatchIntended   BatchState = "intended"
	BatchUploaded   BatchState = "uploaded"
	BatchSubmitted  BatchState = "submitted"
	BatchDownloaded BatchState = "downloaded"
	BatchCollected  BatchState = "collected"
	// BatchAbandoned: given up. Before the server took it (its upload or
	// creation refused), its rows were error records; once submitted, when
	// the provider no longer knows its batch id (404 on every try), its
	// rows, never answered, were asked again in a new batch.
	BatchAbandoned BatchState = "abandoned"
)

// nextBatchStates are the states each may move to; collected and
// abandoned are the ends. A resumed intended batch may have been uploaded
// and created unrecorded: it is uploaded again and found by its metadata,
// so it still moves one step at a time.
var nextBatchStates = map[BatchState][]BatchState{
	BatchIntended:   {BatchUploaded, BatchAbandoned},
	BatchUploaded:   {BatchSubmitted, BatchAbandoned},
	BatchSubmitted:  {BatchDownloaded, BatchAbandoned},
	BatchDownloaded: {BatchCollected},
}

// CanMove says whether a batch in state s may move to state to.
func (s BatchState) CanMove(to BatchState) bool { return slices.Contains(nextBatchStates[s], to) }

// Ended says the batch needs nothing more: collected, or abandoned.
func (s BatchState) Ended() bool { return s == BatchCollected || s == BatchAbandoned }

// BatchCounts is a batch's request_counts, as the provider reports them.
type BatchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// BatchEntry is one batch in the ledger.
type BatchEntry struct {
	Number       int         `json:"number"`
	State        BatchState  `json:"state"`
	Requests     int         `json:"requests"`
	Bytes        int64       `json:"bytes"`
	FileID       string      `json:"input_file_id,omitempty"`
	BatchID      string      `json:"batch_id,omitempty"`
	Status       string      `json:"status,omitempty"` // the server's
	Counts       BatchCounts `json:"request_counts"`
	OutputFileID string      `json:"output_file_id,omitempty"`
	ErrorFileID  string      `json:"error_file_id,omitempty"`
}

// BatchLedger is DIR/batches.json whole.
type BatchLedger struct {
	Version int           `json:"version"`
	Run     string        `json:"run"` // the directory's id in each batch's metadata
	Batches []*BatchEntry `json:"batches"`
}

// ReadBatches reads DIR/batches.json's batches; an error wrapping
// fs.ErrNotExist when the directory has none.
func ReadBatches(dir string) ([]BatchEntry, error) {
	f, err := ReadBatchLedger(layout.Dir(dir).Batches())
	if err != nil {
		return nil, err
	}
	out := make([]BatchEntry, len(f.Batches))
	for i, e := range f.Batches {
		out[i] = *e
	}
	return out, nil
}

// ReadBatchLedger reads the ledger at path, refusing a version it does
// not know and batches out of order.
func ReadBatchLedger(path string) (BatchLedger, error) {
	var f BatchLedger
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
		if _, ok := nextBatchStates[e.State]; !ok && !e.State.Ended() {
			return f, fmt.Errorf("%s: batch %d: state %q is none of a batch's", path, i+1, e.State)
		}
	}
	return f, nil
}
