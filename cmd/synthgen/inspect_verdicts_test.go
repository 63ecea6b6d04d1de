package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// TestInspectNeverOKOfAJobWithNoKeys: a job of zero answers (every row
// bad, or an empty dataset) is sound, with nothing pending, yet holds
// nothing: inspect does not call it ok, and export refuses it, both with a
// non-zero exit that says why.
func TestInspectNeverOKOfAJobWithNoKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, rows, want string }{
		{"every row bad", `{"foo":1}` + "\n" + `{"foo":2}` + "\n", "2 bad rows"},
		{"an empty dataset", "", "the dataset selects no rows"},
	} {
		ds := filepath.Join(t.TempDir(), "prompts.jsonl")
		if err := os.WriteFile(ds, []byte(c.rows), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := inspectFixture(t, sink.FormatJSONL, ds, nil, nil, "")
		out, err := runInspectCmd(t, dir)
		if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), "no keys") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: inspect exit %d: %v, want non-zero naming no keys and %q\n%s", c.name, exitCode(err), err, c.want, out)
		}
		if strings.Contains(out, "ok: ") {
			t.Errorf("%s: inspect says ok:\n%s", c.name, out)
		}
		for _, extra := range [][]string{nil, {"--partial"}} {
			r := cliRun(t, append([]string{"export", dir, "--format", "messages", "--out", filepath.Join(t.TempDir(), "train.jsonl")}, extra...)...)
			if r.err == nil || exitCode(r.err) == 0 || !strings.Contains(r.err.Error(), "no keys") {
				t.Errorf("%s: export %v: exit %d: %v, want refused\n%s", c.name, extra, exitCode(r.err), r.err, r.stderr)
			}
		}
	}
}
