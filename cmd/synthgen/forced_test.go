package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/sink"
)

// TestForcedRunWithNothingToAskKeepsTheJob: 10 records made at temperature
// 0.6; a forced rerun at 1.0 finds every key done and writes nothing, so
// the directory is still the 0.6 job's: going back to 0.6 resumes without
// --force. The forced run is listed all the same, marked forced, with 0
// records and its own job hash.
func TestForcedRunWithNothingToAskKeepsTheJob(t *testing.T) {
	m, url := cliMock(t, nil)
	job := cliJob{baseURL: url, data: cliDataset(t, 10, 0), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, job.args("--generation.temperature", "0.6")...).ok(t, "temperature 0.6")

	before := m.Stats().Requests
	cliRun(t, job.args("--generation.temperature", "1.0", "--force")...).ok(t, "forced 1.0")
	if got := m.Stats().Requests - before; got != 0 {
		t.Fatalf("forced 1.0: %d requests, want none (every key is done)", got)
	}
	man, err := sink.ReadManifest(job.dir)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := generator.ManifestJob(job.dir, man.Job, man.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Sampling.Temperature; got != 0.6 {
		t.Errorf("manifest job temperature %v after a forced run that wrote nothing, want the records' 0.6", got)
	}
	if n := len(man.Runs); n != 2 {
		t.Fatalf("%d runs listed, want 2", n)
	}
	first, forced := man.Runs[0], man.Runs[1]
	if !forced.Forced || forced.RecordsWritten != 0 || forced.JobHash == first.JobHash || forced.JobHash == "" {
		t.Errorf("forced run listed as %+v, want forced, 0 records, its own job hash (not %s)", forced, first.JobHash)
	}

	r := cliRun(t, job.args("--generation.temperature", "0.6")...)
	r.ok(t, "back to 0.6 without --force")
	wantIDs(t, "back to 0.6", cliRecords(t, job.dir), idRange(0, 10)...)

	// And 1.0 without --force is still refused: the records are 0.6's.
	r = cliRun(t, job.args("--generation.temperature", "1.0")...)
	if r.err == nil || !strings.Contains(r.err.Error(), "generation.temperature: 0.6 (on disk) -> 1 (now)") {
		t.Errorf("1.0 without --force: %v, want refused against the records' 0.6", r.err)
	}
}
