package sink

import (
	"fmt"
	"testing"
	"time"
)

// testKilledRunCountsWhatItLeft: a run killed after writing 1,937 records
// (whole parts and an open one) never wrote its count; the run after it
// gives it the records it left on disk, so that the history says what each
// run wrote, not "killed, 0 records". A second kill is counted the same way.
func testKilledRunCountsWhatItLeft(t *testing.T, format string) {
	dir := t.TempDir()
	opts := testOptions(dir, format)
	opts.PartSize = 500

	s := mustOpen(t, opts)
	writeRange(t, s, 0, 1937)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	crash(s)

	s = mustOpen(t, opts)
	writeRange(t, s, 1937, 3814)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	crash(s)

	s = mustOpen(t, opts)
	writeRange(t, s, 3814, 4000)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(m.Runs))
	}
	for i, want := range []int64{1937, 1877, 186} {
		if got := m.Runs[i].RecordsWritten; got != want {
			t.Errorf("run %d: %d records written, want %d (what it left on disk)", i, got, want)
		}
	}
	if m.Runs[0].EndedAt != nil || m.Runs[1].EndedAt != nil || m.Runs[2].EndedAt == nil {
		t.Errorf("ends %v %v %v: the two killed runs must stay unended", m.Runs[0].EndedAt, m.Runs[1].EndedAt, m.Runs[2].EndedAt)
	}
}

// TestDurableCountsOnlyWhatIsFsynced: records and error records count as
// durable once fsynced, not when written: a disk that fills before the
// fsync keeps only what Durable said.
func TestDurableCountsOnlyWhatIsFsynced(t *testing.T) {
	opts := testOptions(t.TempDir(), FormatJSONL)
	opts.SyncInterval = time.Hour // no fsync but Flush's
	s := mustOpen(t, opts)
	defer s.Close()
	writeRange(t, s, 0, 3)
	for i := range 2 {
		if err := s.WriteError(&ErrorRecord{ID: fmt.Sprintf("e%d", i), Cause: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
	if recs, errs := s.Durable(); recs != 0 || errs != 0 {
		t.Errorf("before any fsync: Durable() = (%d, %d), want (0, 0)", recs, errs)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if recs, errs := s.Durable(); recs != 3 || errs != 2 {
		t.Errorf("after Flush: Durable() = (%d, %d), want (3, 2)", recs, errs)
	}
}
