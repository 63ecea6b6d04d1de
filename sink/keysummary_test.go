package sink

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stripKeys rewrites dir's manifest without key summaries, as a version
// before them wrote it.
func stripKeys(t *testing.T, dir string) {
	t.Helper()
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Parts {
		m.Parts[i].Keys = nil
	}
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

// A resume takes an unchanged part's keys from its summary: the file is
// not read (a same-size rewrite with the time put back goes unseen, as the
// size-and-time rule of reconcile lets it), a part whose time moved is
// read and hashed, and a manifest without summaries (an older version's)
// is read from the parts and gains them.
func testResumeReadsSummaries(t *testing.T, format string) {
	dir := t.TempDir()
	closedAfter(t, dir, format, 25)

	// Part 1 (ids 10-19) overwritten with garbage of its size,
	// its time put back: the summary stands for it.
	path := filepath.Join(dir, "data", partName(1, format))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, strings.Repeat("x", int(st.Size())))
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, testOptions(dir, format))
	for _, k := range keysOf(0, 25) {
		if !s.Done(k) {
			t.Errorf("%v not done", k)
		}
	}
	if s.DoneCount() != 25 {
		t.Errorf("DoneCount = %d, want 25", s.DoneCount())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Its time moved: read, hashed, refused.
	if err := os.Chtimes(path, st.ModTime().Add(2*time.Second), st.ModTime().Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testOptions(dir, format)); err == nil || !strings.Contains(err.Error(), partName(1, format)) {
		t.Fatalf("a changed shard whose time moved was accepted: %v", err)
	}
	writeFile(t, path, string(orig))
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}

	// No summaries: the parts are read, the same keys found, and
	// the manifest lists summaries again.
	before, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	stripKeys(t, dir)
	s = mustOpen(t, testOptions(dir, format))
	for _, k := range append(keysOf(0, 25), Key{ID: "25", Sample: 1}, Key{ID: "25"}) {
		if want := k.ID != "25"; s.Done(k) != want {
			t.Errorf("Done(%v) = %v, want %v", k, !want, want)
		}
	}
	after := s.Manifest()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range before.Parts {
		if !reflect.DeepEqual(after.Parts[i].Keys, before.Parts[i].Keys) {
			t.Errorf("%s: keys %+v after reading it, %+v when written", before.Parts[i].Name, after.Parts[i].Keys, before.Parts[i].Keys)
		}
	}
}

// The bookkeeping written per part does not grow with the parts before
// it: the part log line of the 200th part is as long as the 2nd's.
func TestPartLogLineConstant(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, FormatJSONL)
	s := mustOpen(t, opts)
	writeRange(t, s, 0, 2000)
	b, err := os.ReadFile(filepath.Join(dir, s.man.PartLog))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d log lines, want 200", len(lines))
	}
	// Ids, sizes and the summary's first id differ by a few digits, the
	// modification time by its nanoseconds (left out); nothing grows with
	// the parts before.
	modTime := regexp.MustCompile(`"mod_time":"[^"]*"`)
	l2, l200 := modTime.ReplaceAllString(lines[1], ""), modTime.ReplaceAllString(lines[199], "")
	if d := len(l200) - len(l2); d < -16 || d > 16 {
		t.Errorf("line 200 is %d bytes, line 2 %d", len(l200), len(l2))
	}
	if !strings.Contains(lines[199], `"keys":[{"sample":0,"first":1990,"bits":"VQE"}`) {
		t.Errorf("line 200 lists no summary: %s", lines[199])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFileRowIDsSummarized: the ids of a dataset split by file (NAME:ROW)
// are summarized as row bitmaps per file, a part across two files
// included, and a resume takes an unchanged part's keys from there: the
// part overwritten with garbage of its size and its time put back is not
// read.
func TestFileRowIDsSummarized(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	var keys []Key
	for f := range 2 {
		for r := range 15 {
			rec := testRecord(r)
			rec.ID = "part-00" + string(rune('0'+f)) + ".jsonl:" + strconvItoa(r)
			keys = append(keys, rec.Key())
			if err := s.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]bool{}
	for _, p := range m.Parts {
		if len(p.Keys) == 0 {
			t.Fatalf("part %s of file-row ids has no key summary", p.Name)
		}
		for _, k := range p.Keys {
			prefixes[k.Prefix] = true
		}
	}
	if !prefixes["part-000.jsonl:"] || !prefixes["part-001.jsonl:"] {
		t.Errorf("summaries' prefixes %v, want both files'", prefixes)
	}
	path := filepath.Join(dir, "data", partName(1, FormatJSONL)) // rows 10-14 of file 0, 0-4 of file 1
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, strings.Repeat("x", int(st.Size())))
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(dir, FormatJSONL))
	defer s.Close()
	for _, k := range keys {
		if !s.Done(k) {
			t.Errorf("%v not done after the resume", k)
		}
	}
}

func strconvItoa(i int) string { return strconv.Itoa(i) }
