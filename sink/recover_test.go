package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// crashedAfter writes records [0, n) with an fsync per record and drops the
// sink without Close: the directory is what kill -9 leaves.
func crashedAfter(t *testing.T, dir, format string, n int) {
	t.Helper()
	s := mustOpen(t, testOptions(dir, format))
	writeRange(t, s, 0, n)
	crash(s)
}

// closedAfter writes records [0, n) and closes cleanly.
func closedAfter(t *testing.T, dir, format string, n int) {
	t.Helper()
	s := mustOpen(t, testOptions(dir, format))
	writeRange(t, s, 0, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func jsonLines(t *testing.T, from, to int) string {
	t.Helper()
	var b strings.Builder
	for i := from; i < to; i++ {
		line, err := json.Marshal(testRecord(i))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestRecoverResumes covers the states a crash (or a person) can leave that
// recovery resolves on its own: after Open, the wanted keys are done, the
// data directory holds only final parts, and finishing the job yields every
// key exactly once.
func TestRecoverResumes(t *testing.T) {
	const torn = `{"id":"99","sample":1,"source":"ma`
	tests := []struct {
		name      string
		format    string
		setup     func(t *testing.T, dir string)
		done      int      // keys 0..done-1 are done after Open
		wantFiles []string // data/ right after Open
		wantNote  string
	}{
		{
			name: "torn last line in open jsonl shard", format: FormatJSONL,
			setup: func(t *testing.T, dir string) {
				crashedAfter(t, dir, FormatJSONL, 5)
				appendBytes(t, filepath.Join(dir, "data", "part-000000.jsonl.open"), torn)
			},
			done: 5, wantFiles: []string{"part-000000.jsonl"}, wantNote: "recovered part-000000.jsonl (5 records)",
		},
		{
			name: "open jsonl shard after full shards", format: FormatJSONL,
			setup: func(t *testing.T, dir string) { crashedAfter(t, dir, FormatJSONL, 23) },
			done:  23, wantFiles: []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl"},
		},
		{
			name: "empty open shard", format: FormatJSONL,
			setup: func(t *testing.T, dir string) {
				crashedAfter(t, dir, FormatJSONL, 10)
				writeFile(t, filepath.Join(dir, "data", "part-000001.jsonl.open"), torn)
			},
			done: 10, wantFiles: []string{"part-000000.jsonl"}, wantNote: "removed empty part-000001.jsonl.open",
		},
		{
			name: "torn last line in parquet journal", format: FormatParquet,
			setup: func(t *testing.T, dir string) {
				crashedAfter(t, dir, FormatParquet, 15)
				appendBytes(t, filepath.Join(dir, "data", "part-000001.parquet.journal"), torn)
			},
			done: 15, wantFiles: []string{"part-000000.parquet", "part-000001.parquet"},
			wantNote: "recovered part-000001.parquet (5 records) from part-000001.parquet.journal",
		},
		{
			name: "journal and half-written parquet tmp", format: FormatParquet,
			setup: func(t *testing.T, dir string) {
				crashedAfter(t, dir, FormatParquet, 7)
				writeFile(t, filepath.Join(dir, "data", "part-000000.parquet.tmp"), "PAR1 half a file")
			},
			done: 7, wantFiles: []string{"part-000000.parquet"},
		},
		{
			name: "empty journal and tmp", format: FormatParquet,
			setup: func(t *testing.T, dir string) {
				closedAfter(t, dir, FormatParquet, 10)
				writeFile(t, filepath.Join(dir, "data", "part-000001.parquet.journal"), torn)
				writeFile(t, filepath.Join(dir, "data", "part-000001.parquet.tmp"), "PAR1")
			},
			done: 10, wantFiles: []string{"part-000000.parquet"}, wantNote: "removed empty part-000001.parquet.journal",
		},
		{
			name: "journal and final parquet", format: FormatParquet,
			setup: func(t *testing.T, dir string) {
				closedAfter(t, dir, FormatParquet, 10)
				// Crash after the rename, before the journal was removed.
				writeFile(t, filepath.Join(dir, "data", "part-000000.parquet.journal"), jsonLines(t, 0, 10))
			},
			done: 10, wantFiles: []string{"part-000000.parquet"}, wantNote: "removed journal",
		},
		{
			name: "parquet tmp without journal", format: FormatParquet,
			setup: func(t *testing.T, dir string) {
				closedAfter(t, dir, FormatParquet, 10)
				writeFile(t, filepath.Join(dir, "data", "part-000000.parquet.tmp"), "PAR1")
				writeFile(t, filepath.Join(dir, "data", "part-000004.parquet.tmp"), "PAR1")
			},
			done: 10, wantFiles: []string{"part-000000.parquet"}, wantNote: "removed leftover part-000004.parquet.tmp",
		},
		{
			name: "final shard not in the manifest", format: FormatJSONL,
			setup: func(t *testing.T, dir string) {
				closedAfter(t, dir, FormatJSONL, 25)
				m, err := ReadManifest(dir)
				if err != nil {
					t.Fatal(err)
				}
				m.Parts = m.Parts[:1] // crash between rename and manifest write
				if err := writeManifest(dir, m); err != nil {
					t.Fatal(err)
				}
			},
			done: 25, wantFiles: []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl"},
			wantNote: "adopted part-000002.jsonl (5 records)",
		},
		{
			name: "foreign files are left alone", format: FormatJSONL,
			setup: func(t *testing.T, dir string) {
				closedAfter(t, dir, FormatJSONL, 3)
				writeFile(t, filepath.Join(dir, "data", "README.txt"), "mine")
				writeFile(t, filepath.Join(dir, "."+ManifestName+".123.tmp"), "{")
			},
			done: 3, wantFiles: []string{"README.txt", "part-000000.jsonl"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			opts := testOptions(dir, tt.format)
			s := mustOpen(t, opts)
			for _, k := range keysOf(0, tt.done) {
				if !s.Done(k) {
					t.Errorf("key %v not done after recovery", k)
				}
			}
			if s.DoneCount() != tt.done {
				t.Errorf("DoneCount = %d, want %d", s.DoneCount(), tt.done)
			}
			if got := dirNames(t, filepath.Join(dir, "data")); !slices.Equal(got, tt.wantFiles) {
				t.Errorf("data/ after Open = %v, want %v", got, tt.wantFiles)
			}
			if got := dirNames(t, dir); slices.ContainsFunc(got, func(n string) bool { return strings.HasSuffix(n, ".tmp") }) {
				t.Errorf("leftover manifest temporary in %v", got)
			}
			m := s.Manifest()
			notes := strings.Join(m.Runs[len(m.Runs)-1].Notes, "\n")
			if !strings.Contains(notes, tt.wantNote) {
				t.Errorf("run notes %q do not contain %q", notes, tt.wantNote)
			}
			listed := 0
			for _, sh := range m.Parts {
				listed += sh.Records
			}
			if listed != tt.done {
				t.Errorf("manifest lists %d records, want %d", listed, tt.done)
			}
			// Finish the job: exactly once, and the recovered part is not
			// appended to (new records go to a new part).
			for i := range 30 {
				if r := testRecord(i); !skip(s, r.Key()) {
					if err := s.Write(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			assertExactlyOnce(t, dir, keysOf(0, 30))
		})
	}
}

// TestRecoverRefuses covers the states in which records are lost or
// ambiguous: Open fails with an error naming the file, and changes nothing.
func TestRecoverRefuses(t *testing.T) {
	tests := []struct {
		name   string
		format string
		setup  func(t *testing.T, dir string) string // returns the file the error must name
		want   []string
	}{
		{
			name: "manifest shard missing", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 25)
				os.Remove(filepath.Join(dir, "data", "part-000001.jsonl"))
				return "part-000001.jsonl (10 records)"
			},
			want: []string{"missing", "--force"},
		},
		{
			name: "corrupt parquet shard", format: FormatParquet,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatParquet, 25)
				path := filepath.Join(dir, "data", "part-000001.parquet")
				b, _ := os.ReadFile(path)
				copy(b[len(b)-12:], bytes.Repeat([]byte{0}, 12)) // footer gone
				writeFile(t, path, string(b))
				return path
			},
			want: []string{"not a readable parquet file"},
		},
		{
			name: "truncated parquet shard", format: FormatParquet,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatParquet, 25)
				path := filepath.Join(dir, "data", "part-000002.parquet")
				b, _ := os.ReadFile(path)
				writeFile(t, path, string(b[:len(b)/2]))
				return path
			},
		},
		{
			name: "bad line in a final jsonl shard", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 25)
				path := filepath.Join(dir, "data", "part-000001.jsonl")
				lines := strings.SplitAfter(jsonLines(t, 10, 20), "\n")
				lines[3] = "{garbage\n"
				writeFile(t, path, strings.Join(lines, ""))
				return path + ":4"
			},
		},
		{
			name: "final jsonl shard cut mid-line", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 25)
				path := filepath.Join(dir, "data", "part-000001.jsonl")
				b, _ := os.ReadFile(path)
				writeFile(t, path, string(b[:len(b)-20]))
				return path + ":10"
			},
			want: []string{"incomplete"},
		},
		{
			name: "shard changed since written", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 25)
				writeFile(t, filepath.Join(dir, "data", "part-000001.jsonl"), jsonLines(t, 10, 19))
				return "part-000001.jsonl: 9 records on disk, 10 in the manifest"
			},
		},
		{
			name: "key in two shards", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 25)
				writeFile(t, filepath.Join(dir, "data", "part-000007.jsonl"), jsonLines(t, 12, 13))
				return filepath.Join(dir, "data", "part-000001.jsonl") + " and " + filepath.Join(dir, "data", "part-000007.jsonl")
			},
			want: []string{`id="12"`},
		},
		{
			name: "invalid complete line in open shard", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				crashedAfter(t, dir, FormatJSONL, 3)
				path := filepath.Join(dir, "data", "part-000000.jsonl.open")
				appendBytes(t, path, "not json\n"+jsonLines(t, 3, 4))
				return path + ":4"
			},
		},
		{
			name: "open shard and its final both present", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 5)
				path := filepath.Join(dir, "data", "part-000000.jsonl.open")
				writeFile(t, path, jsonLines(t, 0, 5))
				return path
			},
		},
		{
			name: "shards without manifest", format: FormatJSONL,
			setup: func(t *testing.T, dir string) string {
				closedAfter(t, dir, FormatJSONL, 5)
				os.Remove(filepath.Join(dir, ManifestName))
				return "without manifest.json"
			},
			want: []string{"--force"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			name := tt.setup(t, dir)
			before := snapshot(t, dir)
			_, err := Open(testOptions(dir, tt.format))
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, want := range append(tt.want, name) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
			if after := snapshot(t, dir); !equalSnapshots(before, after) {
				t.Errorf("a refused Open changed the directory:\nbefore %v\nafter  %v", keys(before), keys(after))
			}
		})
	}
}

func TestRecoverForceAcceptsLoss(t *testing.T) {
	dir := t.TempDir()
	closedAfter(t, dir, FormatJSONL, 25)
	if err := os.Remove(filepath.Join(dir, "data", "part-000002.jsonl")); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(dir, FormatJSONL)
	opts.Force = true
	s := mustOpen(t, opts)
	if s.DoneCount() != 20 {
		t.Errorf("DoneCount = %d, want 20", s.DoneCount())
	}
	m := s.Manifest()
	if run := m.Runs[len(m.Runs)-1]; !run.Forced || !strings.Contains(strings.Join(run.Notes, "\n"), "lost part-000002.jsonl") {
		t.Errorf("run %+v does not record the forced loss", run)
	}
	writeRange(t, s, 20, 25)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The lost part's name is not reused: a backup restored later cannot
	// collide with the regenerated records.
	want := []string{"part-000000.jsonl", "part-000001.jsonl", "part-000003.jsonl"}
	if got := dirNames(t, filepath.Join(dir, "data")); !slices.Equal(got, want) {
		t.Errorf("data/ = %v, want %v", got, want)
	}
	assertExactlyOnce(t, dir, keysOf(0, 25))
}

func TestRecoverErrorsPart(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	for _, id := range []string{"a", "b"} {
		if err := s.WriteError(&ErrorRecord{ID: id, Cause: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
	crash(s)
	appendBytes(t, filepath.Join(dir, "errors", "part-000000.jsonl.open"), `{"id":"c","sam`)
	s = mustOpen(t, testOptions(dir, FormatJSONL))
	defer s.Close()
	if !s.Failed(Key{ID: "a"}) || !s.Failed(Key{ID: "b"}) || s.Failed(Key{ID: "c"}) || s.FailedCount() != 2 {
		t.Errorf("failed a=%v b=%v c=%v count=%d", s.Failed(Key{ID: "a"}), s.Failed(Key{ID: "b"}), s.Failed(Key{ID: "c"}), s.FailedCount())
	}
	if got := dirNames(t, filepath.Join(dir, "errors")); !slices.Equal(got, []string{"part-000000.jsonl"}) {
		t.Errorf("errors/ = %v", got)
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == LockName {
			return err
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return files
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, filepath.Base(k))
	}
	slices.Sort(ks)
	return ks
}

// A key in two parts (or twice in one) is refused naming the files
// although the set keeps no part per key: string ids (found by FinishBulk)
// and row-index ids (found at once) alike.
func TestRecoverNamesBothFilesOfADuplicate(t *testing.T) {
	line := func(id string) string {
		b, err := json.Marshal(&Record{ID: id, Sample: 0, Content: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	tests := []struct {
		name  string
		parts [][]string
		want  [2]int // the parts the error names
	}{
		{"string ids", [][]string{{"a", "b"}, {"c"}, {"d", "b"}}, [2]int{0, 2}},
		{"row-index ids", [][]string{{"1", "2"}, {"3"}, {"4", "2"}}, [2]int{0, 2}},
		{"twice in one shard", [][]string{{"x"}, {"y", "z", "y"}}, [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, FormatJSONL)
			opts.Force = true // parts without a manifest are adopted
			var names []string
			if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			for i, ids := range tt.parts {
				var b strings.Builder
				for _, id := range ids {
					b.WriteString(line(id))
				}
				name := filepath.Join(dir, "data", partName(i, FormatJSONL))
				writeFile(t, name, b.String())
				names = append(names, name)
			}
			_, err := Open(opts)
			if err == nil {
				t.Fatal("Open accepted a key held twice")
			}
			want := names[tt.want[0]] + " and " + names[tt.want[1]]
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		})
	}
}
