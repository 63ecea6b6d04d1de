package audit

import (
	"fmt"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// FailedForGood counts the keys of the output directory dir that failed
// for good: an error record and no record in its final parts. It reads
// the error records and the parts' keys only (what a resume reads), not
// the records: cheap beside the full audit of Dir.
func FailedForGood(dir string) (int, error) {
	failed := map[sink.Key]bool{}
	if err := sink.ForEachError(dir, func(e *sink.ErrorRecord) error {
		failed[sink.Key{ID: e.ID, Sample: e.Sample}] = true
		return nil
	}); err != nil {
		return 0, err
	}
	if len(failed) == 0 {
		return 0, nil
	}
	m, err := sink.ReadManifest(dir)
	if err != nil {
		return 0, err
	}
	for _, p := range m.Parts {
		if _, err := sink.ScanKeys(layout.Dir(dir).DataPart(p.Name), p.Format, func(k sink.Key) error {
			delete(failed, k)
			return nil
		}); err != nil {
			return 0, err
		}
	}
	return len(failed), nil
}

// FirstPassNote says what a pass reading the output directory dir as its
// dataset (a second pass) lacks: dir's keys failed for good, which have
// no record and so are no rows of it; "" when there are none (or dir does
// not read: the pass says so itself).
func FirstPassNote(dir string) string {
	n, err := FailedForGood(dir)
	if err != nil || n == 0 {
		return ""
	}
	keys := "1 key"
	if n > 1 {
		keys = fmt.Sprintf("%d keys", n)
	}
	return fmt.Sprintf("the first pass %s, read as the dataset, has %s failed for good: no record, so no row of this pass; "+
		"rerun it with --retry-errors, then this pass, to answer them", dir, keys)
}
