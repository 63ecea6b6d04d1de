package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestOpenFailsLeavingNothingRunning: a ledger whose second batch has lost
// its input file fails Open, naming it, and the first batch's goroutine was
// never started (it had been, and was left running).
func TestOpenFailsLeavingNothingRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, FilesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	ledger := `{"version":1,"run":"r","batches":[
{"number":1,"state":"submitted","requests":1,"bytes":10,"batch_id":"b1","request_counts":{}},
{"number":2,"state":"submitted","requests":1,"bytes":10,"batch_id":"b2","request_counts":{}}]}`
	if err := os.WriteFile(filepath.Join(dir, LedgerName), []byte(ledger), 0o644); err != nil {
		t.Fatal(err)
	}
	input, _, _ := files(dir, 1)
	if err := os.WriteFile(input, []byte(`{"custom_id":"0.1.a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Open(Options{API: &API{Base: "http://127.0.0.1:1/v1"}, Dir: dir, MaxRequests: 10, MaxBytes: 1 << 20})
	if err == nil {
		_ = b.Close(false)
		t.Fatal("Open of a ledger whose batch 2 lost its input: no error")
	}
	if !strings.Contains(err.Error(), "batch 2") {
		t.Errorf("error %v, want it to name batch 2", err)
	}
}

// TestSettleFromAClockAhead: a ledger written by a file server whose clock
// is a day ahead makes a resume wait at most Options.Settle, not a day.
func TestSettleFromAClockAhead(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, FilesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	ledger := `{"version":1,"run":"r","batches":[
{"number":1,"state":"uploaded","requests":1,"bytes":10,"input_file_id":"file-1","request_counts":{}}]}`
	path := filepath.Join(dir, LedgerName)
	if err := os.WriteFile(path, []byte(ledger), 0o644); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(24 * time.Hour)
	if err := os.Chtimes(path, ahead, ahead); err != nil {
		t.Fatal(err)
	}
	input, _, _ := files(dir, 1)
	if err := os.WriteFile(input, []byte(`{"custom_id":"0.1.a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const settle = time.Hour
	never := make(chan time.Time) // nothing is waited out: Close ends the run
	b, err := Open(Options{API: &API{Base: "http://127.0.0.1:1/v1"}, Dir: dir, MaxRequests: 10, MaxBytes: 1 << 20,
		Settle: settle, After: func(time.Duration) <-chan time.Time { return never }})
	if err != nil {
		t.Fatal(err)
	}
	n, wait := b.Settling()
	_ = b.Close(false)
	if n != 1 || wait <= 0 || wait > settle {
		t.Errorf("Settling() = %d, %s; want 1 batch and a wait in (0, %s]", n, wait, settle)
	}
}
