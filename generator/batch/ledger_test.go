package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateMoves: a batch moves one step at a time, to abandoned before
// it is downloaded (refused, or lost by the provider), and never out of collected or abandoned; a
// refused move leaves the ledger on disk as it was.
func TestStateMoves(t *testing.T) {
	all := []State{StateIntended, StateUploaded, StateSubmitted, StateDownloaded, StateCollected, StateAbandoned}
	allowed := map[[2]State]bool{
		{StateIntended, StateUploaded}: true, {StateIntended, StateAbandoned}: true,
		{StateUploaded, StateSubmitted}: true, {StateUploaded, StateAbandoned}: true,
		{StateSubmitted, StateDownloaded}: true, {StateSubmitted, StateAbandoned}: true,
		{StateDownloaded, StateCollected}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := from.CanMove(to); got != allowed[[2]State{from, to}] {
				t.Errorf("%s to %s: %v", from, to, got)
			}
		}
	}
	dir := t.TempDir()
	l, err := openLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.add(1, 10)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, LedgerName))
	if err := l.move(e, StateSubmitted, func() { e.BatchID = "b" }); err == nil || !strings.Contains(err.Error(), "cannot go from intended to submitted") {
		t.Errorf("intended to submitted: %v, want a refusal", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, LedgerName))
	if string(before) != string(after) || e.State != StateIntended || e.BatchID != "" {
		t.Errorf("a refused move changed the ledger:\n%s\n%s", before, after)
	}
	if err := l.move(e, StateUploaded, func() { e.FileID = "f" }); err != nil {
		t.Fatal(err)
	}
	es, err := ReadLedger(dir)
	if err != nil || es[0].State != StateUploaded || es[0].FileID != "f" {
		t.Errorf("after a move: %+v (%v)", es, err)
	}
}

// TestReadLedgerRefusesAnUnknownState: a state no batch has names the
// file and the batch.
func TestReadLedgerRefusesAnUnknownState(t *testing.T) {
	dir := t.TempDir()
	body := `{"version":1,"run":"r","batches":[{"number":1,"state":"uplodaed","requests":1,"bytes":1,"request_counts":{}}]}`
	if err := os.WriteFile(filepath.Join(dir, LedgerName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLedger(dir); err == nil || !strings.Contains(err.Error(), `batch 1: state "uplodaed"`) {
		t.Errorf("ReadLedger: %v, want the state refused, naming batch 1", err)
	}
}
