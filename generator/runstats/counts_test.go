package runstats

import "testing"

// TestSummaryCounts: bad rows (a repeated id among them) leave the total
// and are no keys done before the run; records the sink lost are lost,
// not canceled (canceled counts abandoned requests, never more than were
// in flight).
func TestSummaryCounts(t *testing.T) {
	s := NewStats(nil)
	s.SetTotal(20) // 10 rows, n = 2
	s.AddAlreadyDone(4)
	s.AddBadRows(3, 6)
	s.AddRepeated(1)
	r := s.Begin()
	r.Done(Outcome{CompletionTokens: 5, UsageKnown: true})
	r = s.Begin()
	r.Cancel()
	s.AddCanceled()
	s.Retract(1, 0)
	snap := s.Snapshot()
	if snap.Total != 10 || snap.AlreadyDone != 4 || snap.BadRows != 3 || snap.Planned() != 14 {
		t.Errorf("total %d, already done %d, bad rows %d, planned %d; want 10, 4, 3, 14", snap.Total, snap.AlreadyDone, snap.BadRows, snap.Planned())
	}
	sum := s.Summary(true)
	want := Summary{Written: 0, Skipped: 4, BadRows: 3, Drained: true, Canceled: 1, Lost: 1, Duplicates: 1}
	if sum != want {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
}
