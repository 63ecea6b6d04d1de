package pool

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// TestRepeatedCustomIDIsABadRow (issue 21): in an OpenAI batch file a
// repeated custom_id is a bad row, named with its line and its first
// row's, out of the total, and no key done before the run: in a fresh
// directory, and again on the resume, where the first copy's key is held
// (the run tells it from a key done by the marks its pass leaves), also
// when rows are passed over before decoding; with two samples.
func TestRepeatedCustomIDIsABadRow(t *testing.T) {
	srv := &countingServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var b strings.Builder
	ids := []string{"r1", "r2", "r1", "r3", "r2", "r1"}
	for i, id := range ids {
		fmt.Fprintf(&b, `{"custom_id":%q,"body":{"messages":[{"role":"user","content":"q%d"}]}}`+"\n", id, i)
	}
	path := filepath.Join(t.TempDir(), "batch.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const samples = 2
	dir := t.TempDir()
	run := func(what string) (runstats.Summary, runstats.Snapshot, []string) {
		t.Helper()
		var said []string
		src, err := dataset.Open(dataset.Options{Selection: dataset.Selection{Path: path},
			OnSkip: func(e *dataset.RowError) { said = append(said, strings.ReplaceAll(e.Error(), path, "B")) }})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		stats := runstats.NewStats(nil)
		stats.SetTotal(int64(len(ids) * samples))
		opts := testOptions(2)
		opts.UniqueIDs, opts.Sampling.Samples = true, samples
		out := openSink(t, dir)
		eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 2}), stats, opts)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := eng.Run(context.Background(), src, out)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		return sum, stats.Snapshot(), said
	}
	wantSaid := []string{
		`B:3: custom_id: repeats the id "r1" of B:1 (each id is asked once, by its first row)`,
		`B:5: custom_id: repeats the id "r2" of B:2 (each id is asked once, by its first row)`,
		`B:6: custom_id: repeats the id "r1" of B:1 (each id is asked once, by its first row)`,
	}
	sum, snap, said := run("fresh")
	if sum.Written != 6 || sum.Skipped != 0 || sum.BadRows != 3 || sum.Duplicates != 3 {
		t.Errorf("fresh: summary %+v; want 6 written, none already done, 3 bad rows repeating an id", sum)
	}
	if snap.AlreadyDone != 0 || snap.Planned() != 6 {
		t.Errorf("fresh: already done %d, planned %d; want 0 and 6", snap.AlreadyDone, snap.Planned())
	}
	if strings.Join(said, "\n") != strings.Join(wantSaid, "\n") {
		t.Errorf("fresh: said\n%s\nwant\n%s", strings.Join(said, "\n"), strings.Join(wantSaid, "\n"))
	}
	before := srv.requests.Load()
	sum, snap, said = run("resume")
	if sum.Written != 0 || sum.Skipped != 6 || sum.BadRows != 3 || sum.Duplicates != 3 || srv.requests.Load() != before {
		t.Errorf("resume: summary %+v, %d requests; want nothing asked, 6 already done, 3 bad rows", sum, srv.requests.Load()-before)
	}
	if snap.AlreadyDone != 6 || snap.Planned() != 6 {
		t.Errorf("resume: already done %d, planned %d; want 6 and 6", snap.AlreadyDone, snap.Planned())
	}
	if strings.Join(said, "\n") != strings.Join(wantSaid, "\n") {
		t.Errorf("resume: said\n%s\nwant\n%s", strings.Join(said, "\n"), strings.Join(wantSaid, "\n"))
	}
	if got := readIDs(t, dir); len(got) != 3 || got["r1"] != samples || got["r2"] != samples || got["r3"] != samples {
		t.Errorf("records %v: want r1, r2, r3 with %d samples each", got, samples)
	}
}
