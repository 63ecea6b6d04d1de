package sink

import (
	"maps"
	"slices"
	"testing"
)

// The audit of an output directory (package sink/audit) must agree with
// recovery in every state these tests leave a directory in: a directory a
// resume refuses is invalid to it, one a resume takes is valid. sink/audit
// imports sink, so these tests, inside package sink, cannot import it: the
// external test package, linked into the same test binary, sets AuditDir
// (audit_link_test.go).

// Audited is what these tests check of an audit.
type Audited struct {
	OK       bool
	Problems []string
	Notes    []string
	Records  int64
	Has      func(Key) bool
}

// AuditDir audits the output directory dir.
var AuditDir func(dir string) (*Audited, error)

// mustInspect audits dir and fails the test when that errs or changes a
// byte of it.
func mustInspect(t testing.TB, dir string) *Audited {
	t.Helper()
	if AuditDir == nil {
		t.Fatal("AuditDir is not set: audit_link_test.go is not in the test binary")
	}
	before := fileHashes(t, dir)
	a, err := AuditDir(dir)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if after := fileHashes(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the audit changed the directory:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	return a
}
