package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// manifestJob reads DIR's manifest and the job it records.
func manifestJob(t *testing.T, dir string) (*sink.Manifest, job.Job) {
	t.Helper()
	man, err := sink.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := job.ManifestJob(dir, man.Job, man.Identity)
	if err != nil {
		t.Fatal(err)
	}
	return man, j
}

// TestForcedRunWithNothingToAskKeepsTheJob: 10 records made at temperature
// 0.6; a forced rerun at 1.0 finds every key done and writes nothing, so
// the directory is still the 0.6 job's: going back to 0.6 resumes without
// --force. The forced run is listed all the same, marked forced, with 0
// records and its own job hash.
func TestForcedRunWithNothingToAskKeepsTheJob(t *testing.T) {
	m, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 10, 0), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args("--generation.temperature", "0.6")...).ok(t, "temperature 0.6")

	before := m.Stats().Requests
	cliRun(t, cj.args("--generation.temperature", "1.0", "--force")...).ok(t, "forced 1.0")
	if got := m.Stats().Requests - before; got != 0 {
		t.Fatalf("forced 1.0: %d requests, want none (every key is done)", got)
	}
	man, stored := manifestJob(t, cj.dir)
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

	r := cliRun(t, cj.args("--generation.temperature", "0.6")...)
	r.ok(t, "back to 0.6 without --force")
	wantIDs(t, "back to 0.6", cliRecords(t, cj.dir), idRange(0, 10)...)

	// And 1.0 without --force is still refused: the records are 0.6's.
	r = cliRun(t, cj.args("--generation.temperature", "1.0")...)
	if r.err == nil || !strings.Contains(r.err.Error(), "generation.temperature: 0.6 (on disk) -> 1 (now)") {
		t.Errorf("1.0 without --force: %v, want refused against the records' 0.6", r.err)
	}
}

// TestInspectNamesMixedJobs: a forced run that does write leaves records
// of two jobs in the directory; the manifest's job is the latest, both are
// kept in its jobs, and inspect notes the mix by the settings that differ.
func TestInspectNamesMixedJobs(t *testing.T) {
	_, url := cliMock(t, nil)
	cj := cliJob{baseURL: url, data: cliDataset(t, 10, 0), dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, cj.args("--dataset.limit", "5", "--generation.temperature", "0.6")...).ok(t, "temperature 0.6")
	cliRun(t, cj.args("--generation.temperature", "1.0", "--force")...).ok(t, "forced 1.0")

	man, _ := manifestJob(t, cj.dir)
	if len(man.Jobs) != 2 || man.Jobs[man.JobHash] == nil || man.Runs[1].JobHash != man.JobHash || man.Jobs[man.Runs[0].JobHash] == nil {
		t.Fatalf("manifest job %s, jobs %d, runs %+v: want the forced job latest and both jobs kept", man.JobHash, len(man.Jobs), man.Runs)
	}
	r := cliRun(t, "inspect", cj.dir)
	r.ok(t, "inspect")
	for _, want := range []string{
		"the directory mixes records of 2 jobs",
		man.JobHash[:12] + " (generation.temperature 1) is the manifest's, the latest",
		man.Runs[0].JobHash[:12] + " (generation.temperature 0.6)",
		"FORCED, job " + man.JobHash[:12],
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect does not say %q:\n%s", want, r.stdout)
		}
	}

	// One job: no such note.
	one := cliJob{baseURL: url, data: cj.data, dir: filepath.Join(t.TempDir(), "out")}
	cliRun(t, one.args()...).ok(t, "one job")
	if r := cliRun(t, "inspect", one.dir); strings.Contains(r.stdout, "mixes") {
		t.Errorf("a one-job directory is said to mix jobs:\n%s", r.stdout)
	}
}
