package sink_test

import (
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// The audit for the tests of package sink (audit_hook_test.go).
func init() {
	sink.AuditDir = func(dir string) (*sink.Audited, error) {
		a, err := audit.Dir(dir)
		if err != nil {
			return nil, err
		}
		return &sink.Audited{OK: a.OK(), Problems: a.Problems, Notes: a.Notes, Records: a.Records, Has: a.Has}, nil
	}
}
