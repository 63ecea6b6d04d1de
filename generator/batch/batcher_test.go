package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
