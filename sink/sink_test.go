package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/sink/keyset"
	"github.com/synthgen/synthgen/sink/layout"
)

func testWriteCloseReopen(t *testing.T, format string) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, format))
	writeRange(t, s, 0, 25)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"part-000000." + format, "part-000001." + format, "part-000002." + format}
	if got := dirNames(t, filepath.Join(dir, "data")); !slices.Equal(got, wantFiles) {
		t.Fatalf("data/ = %v, want %v (no temporaries after Close)", got, wantFiles)
	}

	s = mustOpen(t, testOptions(dir, format))
	defer s.Close()
	if s.DoneCount() != 25 {
		t.Errorf("DoneCount = %d, want 25", s.DoneCount())
	}
	for _, k := range keysOf(0, 25) {
		if !s.Done(k) || !skip(s, k) {
			t.Errorf("key %v not done after reopen", k)
		}
	}
	if s.Done(testRecord(25).Key()) {
		t.Error("key 25 done but never written")
	}
	m := s.Manifest()
	// Keys: ids 0, 2, 4, 6, 8 of sample 0 are bits 0, 2, 4, 6, 8
	// from 0: bytes 0x55 0x01, base64 "VQE".
	wantParts := []PartInfo{
		{Name: wantFiles[0], Format: format, Records: 10, FirstID: "0", LastID: "9",
			Keys: []keyset.SampleKeys{{Sample: 0, First: 0, Bits: "VQE"}, {Sample: 1, First: 1, Bits: "VQE"}}},
		{Name: wantFiles[1], Format: format, Records: 10, FirstID: "10", LastID: "19",
			Keys: []keyset.SampleKeys{{Sample: 0, First: 10, Bits: "VQE"}, {Sample: 1, First: 11, Bits: "VQE"}}},
		{Name: wantFiles[2], Format: format, Records: 5, FirstID: "20", LastID: "24",
			Keys: []keyset.SampleKeys{{Sample: 0, First: 20, Bits: "FQ"}, {Sample: 1, First: 21, Bits: "BQ"}}},
	}
	for i := range m.Parts {
		// Each part's stamp is its file as written.
		_, _, sum, err := fileStamp(filepath.Join(dir, "data", m.Parts[i].Name))
		if err != nil || m.Parts[i].XXH64 != sum || m.Parts[i].Size == 0 || m.Parts[i].ModTime.IsZero() {
			t.Errorf("shard %s stamped %+v, file's xxh64 %s (%v)", m.Parts[i].Name, m.Parts[i], sum, err)
		}
		m.Parts[i].Size, m.Parts[i].ModTime, m.Parts[i].XXH64 = 0, time.Time{}, ""
	}
	if !reflect.DeepEqual(m.Parts, wantParts) {
		t.Errorf("manifest shards = %+v, want %+v", m.Parts, wantParts)
	}
	if len(m.Runs) != 2 || m.Runs[0].EndedAt == nil || m.Runs[0].RecordsWritten != 25 {
		t.Errorf("runs = %+v, want a closed first run with 25 records and a second one", m.Runs)
	}
	assertExactlyOnce(t, dir, keysOf(0, 25))
}

// Every field written comes back equal from a reader that is not the sink's,
// the messages list included (the standard LIST layout for Parquet).
func testRecordsReadBack(t *testing.T, format string) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, format))
	var want []Record
	for i := range 13 {
		r := testRecord(i)
		want = append(want, *r)
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readParts(t, dir)
	for i := range got {
		got[i].CreatedAt = got[i].CreatedAt.UTC()
		got[i].emptyTokensNil() // Parquet's empty lists, as the sink's reader makes them
		got[i].emptyToolsNil()
		if len(got[i].Turns) == 0 {
			got[i].Turns = nil // Parquet has an empty list where JSON has none
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back differs:\n got %+v\nwant %+v", got[0], want[0])
	}
}

func TestWriteDoneKeyRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	writeRange(t, s, 0, 3)
	if err := s.Write(testRecord(1)); err == nil || !strings.Contains(err.Error(), "already done") {
		t.Fatalf("second write of key 1: err = %v, want already done", err)
	}
	// The refusal is not a failure of the sink: later writes still work.
	writeRange(t, s, 3, 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir, FormatJSONL))
	if err := s.Write(testRecord(2)); err == nil {
		t.Fatal("write of a key recovered from disk succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, dir, keysOf(0, 4))
}

func TestWriteRefusesInvalidUTF8ID(t *testing.T) {
	s := mustOpen(t, testOptions(t.TempDir(), FormatJSONL))
	defer s.Close()
	r := testRecord(0)
	r.ID = "bad\xff"
	if err := s.Write(r); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("err = %v, want an error about UTF-8", err)
	}
}

// A crash loses at most what was not yet synced; every synced key is done
// exactly once after resume, and finishing the job yields every key once.
func testCrashExactlyOnce(t *testing.T, format string) {
	dir := t.TempDir()
	clock := time.Unix(0, 0)
	opts := testOptions(dir, format)
	opts.SyncInterval = time.Hour // only Flush and rotation sync
	opts.Now = func() time.Time { return clock }

	s := mustOpen(t, opts)
	writeRange(t, s, 0, 23) // two parts final, 3 records in the third
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	writeRange(t, s, 23, 27) // never synced: may be lost
	crash(s)

	s = mustOpen(t, opts)
	for _, k := range keysOf(0, 23) {
		if !s.Done(k) {
			t.Errorf("flushed key %v not done after crash", k)
		}
	}
	// Resume the job: write every key that is not done.
	for i := range 40 {
		if r := testRecord(i); !skip(s, r.Key()) {
			if err := s.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	crash(s) // a second crash, mid-part, right after the writes

	s = mustOpen(t, opts)
	for i := range 40 {
		if r := testRecord(i); !skip(s, r.Key()) {
			if err := s.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, dir, keysOf(0, 40))
	for _, name := range dirNames(t, filepath.Join(dir, "data")) {
		if !strings.HasSuffix(name, "."+format) {
			t.Errorf("temporary %s left after Close", name)
		}
	}
}

func TestSyncInterval(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(0, 0)
	opts := testOptions(dir, FormatJSONL)
	opts.PartSize = 100
	opts.SyncInterval = time.Second
	opts.Now = func() time.Time { return clock }
	s := mustOpen(t, opts)
	defer s.Close()
	open := filepath.Join(dir, "data", "part-000000.jsonl.open")
	lines := func() int {
		b, err := os.ReadFile(open)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	writeRange(t, s, 0, 3)
	if n := lines(); n != 0 {
		t.Errorf("%d lines on disk before the interval elapsed, want 0 (buffered)", n)
	}
	clock = clock.Add(time.Second)
	writeRange(t, s, 3, 4)
	if n := lines(); n != 4 {
		t.Errorf("%d lines on disk after the interval, want 4", n)
	}
	writeRange(t, s, 4, 6)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := lines(); n != 6 {
		t.Errorf("%d lines on disk after Flush, want 6", n)
	}
}

// TestCheck: Open hands the manifest on disk to Options.Check before it
// changes anything; a refusal leaves the directory as it was, and what the
// check accepted only by force is recorded in a run marked forced.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	writeRange(t, s, 0, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}

	opts := testOptions(dir, FormatJSONL)
	refused := errors.New("another job")
	var seen *Manifest
	opts.Check = func(old *Manifest) ([]string, error) {
		seen = old
		return nil, refused
	}
	if _, err := Open(opts); !errors.Is(err, refused) {
		t.Fatalf("Open = %v, want the check's error", err)
	}
	var stored bytes.Buffer
	if seen != nil {
		_ = json.Compact(&stored, seen.Job)
	}
	if seen == nil || seen.JobHash != testJob.Hash || stored.String() != string(testJob.Spec) || seen.ManifestVersion != ManifestVersion {
		t.Errorf("check saw %+v, want the stored job", seen)
	}
	after, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	if string(after) != string(before) {
		t.Error("a refused Open changed the manifest")
	}

	// A forced run that writes nothing changes nothing but the run list:
	// the records are still the first job's alone.
	opts.Job.Hash, opts.Job.Limit, opts.Job.Spec = "other", 500, json.RawMessage(`{"temperature":0.7}`)
	opts.Check = func(*Manifest) ([]string, error) { return []string{"generation.temperature: 0.6 -> 0.7"}, nil }
	s = mustOpen(t, opts)
	if s.DoneCount() != 2 {
		t.Errorf("DoneCount = %d after forced resume, want 2", s.DoneCount())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	last := m.Runs[len(m.Runs)-1]
	if !last.Forced || last.JobHash != "other" || last.Limit != 500 || !slices.Contains(last.Notes, "forced: generation.temperature: 0.6 -> 0.7") {
		t.Errorf("forced run listed as %+v, want forced, its own hash and limit, the note", last)
	}
	if m.JobHash != testJob.Hash || m.Limit != testJob.Limit || len(m.Jobs) != 1 || m.Jobs[testJob.Hash] == nil {
		t.Errorf("manifest after a forced run that wrote nothing: job %s, limit %d, jobs %v; want the first job's alone", m.JobHash, m.Limit, m.Jobs)
	}

	// A forced run that writes takes the job over with its first record,
	// and the directory then holds two jobs' records.
	s = mustOpen(t, opts)
	if m := s.Manifest(); m.JobHash != testJob.Hash {
		t.Errorf("forced run took the job over before writing: %s", m.JobHash)
	}
	writeRange(t, s, 2, 3)
	if m, err := ReadManifest(dir); err != nil || m.JobHash != "other" || m.Limit != 500 {
		t.Errorf("manifest on disk after the forced run's first record: %v %+v, want job other (before any shard is finalized)", err, m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var other bytes.Buffer
	_ = json.Compact(&other, m.Jobs["other"])
	if m.JobHash != "other" || len(m.Jobs) != 2 || other.String() != `{"temperature":0.7}` || m.Jobs[testJob.Hash] == nil {
		t.Errorf("manifest after a forced run that wrote: job %s, jobs %v; want other, both jobs listed", m.JobHash, m.Jobs)
	}
	// A check that accepts with nothing forced does not mark the run.
	opts.Check = func(*Manifest) ([]string, error) { return nil, nil }
	s = mustOpen(t, opts)
	if m := s.Manifest(); m.Runs[len(m.Runs)-1].Forced {
		t.Error("run marked forced although nothing differed")
	}
	s.Close()
}

// TestManifestFromTheFuture: a manifest version this code does not know is
// refused with what to do, not misread.
func TestManifestFromTheFuture(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"manifest_version": 99}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(testOptions(dir, FormatJSONL))
	if err == nil || !strings.Contains(err.Error(), "manifest version 99 is newer") {
		t.Fatalf("Open = %v, want a refusal naming the version", err)
	}
}

func TestLimitDoesNotChangeIdentity(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, FormatJSONL)
	opts.Job.Limit = 10
	s := mustOpen(t, opts)
	writeRange(t, s, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Job.Limit = 0
	s = mustOpen(t, opts)
	defer s.Close()
	if s.DoneCount() != 10 {
		t.Errorf("DoneCount = %d, want 10", s.DoneCount())
	}
}

func TestErrorsRetryAndSupersede(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, FormatJSONL)
	s := mustOpen(t, opts)
	writeRange(t, s, 0, 2)
	for _, i := range []int{5, 6} {
		e := &ErrorRecord{ID: testRecord(i).ID, Sample: testRecord(i).Sample, Status: 400, Message: "bad", Attempts: 1, Cause: "http_400"}
		if err := s.WriteError(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteError(&ErrorRecord{ID: "0", Sample: 0}); err == nil {
		t.Error("error record for a done key accepted")
	}
	k5, k6 := testRecord(5).Key(), testRecord(6).Key()
	if !s.Failed(k5) || !skip(s, k5) || s.FailedCount() != 2 {
		t.Errorf("after WriteError: Failed=%v Skip=%v FailedCount=%d", s.Failed(k5), skip(s, k5), s.FailedCount())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(dir, "errors")); !slices.Equal(got, []string{"part-000000.jsonl"}) {
		t.Errorf("errors/ = %v", got)
	}

	s = mustOpen(t, opts)
	if !s.Failed(k5) || !skip(s, k5) || s.FailedCount() != 2 {
		t.Errorf("reopen without retry: Failed=%v Skip=%v FailedCount=%d", s.Failed(k5), skip(s, k5), s.FailedCount())
	}
	s.Close()

	s = mustOpen(t, opts)
	if rec := s.Recovered(); !rec.Failed(k5) || rec.Done(k5) {
		t.Errorf("reopen: recovered Failed=%v Done=%v, want failed and not done (a retry may ask it)", rec.Failed(k5), rec.Done(k5))
	}
	if err := s.Write(testRecord(5)); err != nil {
		t.Fatal(err)
	}
	// Failing again on a retry is recorded again.
	if err := s.WriteError(&ErrorRecord{ID: k6.ID, Sample: k6.Sample, Cause: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if s.Failed(k5) || !s.Done(k5) || s.FailedCount() != 1 {
		t.Errorf("after success: Failed=%v Done=%v FailedCount=%d", s.Failed(k5), s.Done(k5), s.FailedCount())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, opts)
	defer s.Close()
	if s.Failed(k5) || !s.Done(k5) || !s.Failed(k6) || s.FailedCount() != 1 {
		t.Errorf("after resume: Failed(5)=%v Done(5)=%v Failed(6)=%v FailedCount=%d",
			s.Failed(k5), s.Done(k5), s.Failed(k6), s.FailedCount())
	}
}

func TestOpenIsExclusive(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	_, err := Open(testOptions(dir, FormatJSONL))
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: err = %v, want in use", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir, FormatJSONL))
	s.Close()
}

// TestLockNamesItsHolder: a run refused an output directory learns which
// process holds it, where (the directory may be on shared storage), and
// what to do; the lock itself stays the flock.
func TestLockNamesItsHolder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(testOptions(dir, FormatJSONL))
	want := fmt.Sprintf("output dir %s is in use by synthgen pid %d on %s; wait for it to end, or stop it", dir, os.Getpid(), host)
	if err == nil || err.Error() != want {
		t.Errorf("second Open: %v\nwant %s", err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Released with its holder's words still in the file: the next Open
	// takes it and writes its own.
	s = mustOpen(t, testOptions(dir, FormatJSONL))
	b, err := os.ReadFile(filepath.Join(dir, LockName))
	if err != nil || !strings.Contains(string(b), fmt.Sprintf(`"pid":%d`, os.Getpid())) {
		t.Errorf("lock file %q (%v), want this process's pid", b, err)
	}
	s.Close()
}

func TestOpenValidates(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"format", func(o *Options) { o.Format = "csv" }, "output.format"},
		{"shard size", func(o *Options) { o.PartSize = 0 }, "output.shard_size"},
		{"sync interval", func(o *Options) { o.SyncInterval = -time.Second }, "output.sync_interval"},
		{"dir", func(o *Options) { o.Dir = "" }, "output.dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t.TempDir(), FormatJSONL)
			tt.edit(&opts)
			_, err := Open(opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to name %s", err, tt.want)
			}
		})
	}
}

func TestMixedFormatsResume(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	writeRange(t, s, 0, 12)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir, FormatParquet))
	writeRange(t, s, 12, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.parquet"}
	if got := dirNames(t, filepath.Join(dir, "data")); !slices.Equal(got, want) {
		t.Errorf("data/ = %v, want %v", got, want)
	}
	assertExactlyOnce(t, dir, keysOf(0, 20))
}

// TestOpenRefusesDirsNotItsOwn: the filesystem root, and a directory that
// holds other files and nothing of a synthgen output, are refused before
// anything is written there; an empty directory and an output are fine.
func TestOpenRefusesDirsNotItsOwn(t *testing.T) {
	// The check itself, not Open: a regression must not write into / .
	if err := layout.CheckOwn("/"); err == nil || !strings.Contains(err.Error(), "filesystem root") {
		t.Errorf("layout.CheckOwn(/) = %v, want a refusal", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(testOptions(dir, FormatJSONL))
	if err == nil || !strings.Contains(err.Error(), "notes.txt") || !strings.Contains(err.Error(), "not a synthgen output") {
		t.Errorf("Open(dir with notes.txt) = %v, want a refusal naming it", err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("a refused Open wrote %v", names)
	}
	s := mustOpen(t, testOptions(t.TempDir(), FormatJSONL))
	writeRange(t, s, 0, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What a run leaves beside its output (status, report, history, the
	// batch ledger) is no stranger's file: a directory emptied of its data
	// but not of them is opened.
	left := t.TempDir()
	for _, name := range []string{"status.json", "report.json", "history.jsonl", "batches.json"} {
		if err := os.WriteFile(filepath.Join(left, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := layout.CheckOwn(left); err != nil {
		t.Errorf("a directory holding only a run's status files: %v", err)
	}
}

// testChangedPartRefused: bytes flipped inside a finished part (its size
// unchanged) are caught on resume, which reads only the keys, and by
// inspect; a part only touched (a copy of the directory) resumes.
func testChangedPartRefused(t *testing.T, format string) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, format))
	writeRange(t, s, 0, 12)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data", partName(0, format))

	// A copy: new modification time, same bytes.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir, format))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte in the middle: inside a record of the JSONL file,
	// inside a page of the Parquet one; the size stays.
	i := len(data) / 2
	if format == FormatJSONL {
		// Inside an answer's text: the line stays valid JSON.
		i = bytes.Index(data, []byte("answer 3")) + 1
	}
	data[i] ^= 0x01
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(testOptions(dir, format))
	if err == nil || !strings.Contains(err.Error(), partName(0, format)) || !strings.Contains(err.Error(), "bytes changed") {
		t.Fatalf("resume after a flipped byte: %v, want a refusal naming the shard", err)
	}
	if rep := mustInspect(t, dir); rep.OK || !strings.Contains(strings.Join(rep.Problems, "\n"), partName(0, format)) {
		t.Errorf("audit: ok=%v problems %v, want the changed shard", rep.OK, rep.Problems)
	}
}
