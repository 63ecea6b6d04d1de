package sink_test

import (
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// The audit for the tests of package sink (audit_hook_test.go). The audit
// keeps no lookup of its keys; the tests' directories are small enough to
// hold them.
func init() {
	sink.AuditDir = func(dir string) (*sink.Audited, error) {
		a, err := audit.Dir(dir)
		if err != nil {
			return nil, err
		}
		defer a.Close()
		held := map[sink.Key]bool{}
		if err := a.EachKey(func(k sink.Key) bool { held[k] = true; return true }); err != nil {
			return nil, err
		}
		return &sink.Audited{OK: a.OK(), Problems: a.Problems, Notes: a.Notes, Records: a.Records, Has: func(k sink.Key) bool { return held[k] }}, nil
	}
}
