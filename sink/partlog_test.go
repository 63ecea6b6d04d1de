package sink

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rawManifest reads manifest.json alone, without the part log it names.
func rawManifest(t *testing.T, dir string) *Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func partNames(parts []PartInfo) []string {
	var names []string
	for _, sh := range parts {
		names = append(names, sh.Name)
	}
	return names
}

func partLogs(t *testing.T, dir string) []string {
	t.Helper()
	return slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return !IsPartLog(n) })
}

// TestPartLogAppends: a finalized part is appended to the run's log, not
// written into manifest.json, which keeps what Open wrote until Close folds
// the log into it and removes the log.
func TestPartLogAppends(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, FormatJSONL))
	opened, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	writeRange(t, s, 0, 35)
	if now, _ := os.ReadFile(filepath.Join(dir, ManifestName)); string(now) != string(opened) {
		t.Error("manifest.json was rewritten by a finalized shard")
	}
	raw := rawManifest(t, dir)
	if raw.PartLog != partLogName(0) || len(raw.Parts) != 0 {
		t.Fatalf("manifest.json names log %q and lists %v, want %q and nothing", raw.PartLog, partNames(raw.Parts), partLogName(0))
	}
	if n := len(readLines(t, filepath.Join(dir, raw.PartLog))); n != 3 {
		t.Errorf("log holds %d lines, want one per finalized shard (3)", n)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := partNames(m.Parts); !slices.Equal(got, []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl"}) {
		t.Errorf("ReadManifest lists %v, want the log's shards", got)
	}
	if m.Parts[0].XXH64 == "" || m.Parts[0].Size == 0 {
		t.Errorf("log lost the shard's stamp: %+v", m.Parts[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw = rawManifest(t, dir)
	if raw.PartLog != "" || len(raw.Parts) != 4 {
		t.Errorf("after Close manifest.json names log %q and lists %v, want none and 4 shards", raw.PartLog, partNames(raw.Parts))
	}
	if logs := partLogs(t, dir); len(logs) != 0 {
		t.Errorf("logs left after Close: %v", logs)
	}
}

// TestPartLogCrashStates covers what a crash can leave of the log: each
// state is made from a run killed after three finalized parts (the log
// lists part-000000..2, part-000003.jsonl.open holds 5 records), then the
// directory is resumed.
func TestPartLogCrashStates(t *testing.T) {
	log0 := partLogName(0)
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		force    bool
		refuse   string // the error Open must give, naming what
		wantNote string
		want     []string // parts the manifest lists after Open
	}{
		{
			name:  "killed run",
			setup: func(t *testing.T, dir string) {},
			want:  []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl", "part-000003.jsonl"},
		},
		{
			name: "torn last line",
			setup: func(t *testing.T, dir string) {
				path := filepath.Join(dir, log0)
				b, _ := os.ReadFile(path)
				writeFile(t, path, string(b[:len(b)-30]))
			},
			wantNote: "adopted part-000002.jsonl (10 records)",
			want:     []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl", "part-000003.jsonl"},
		},
		{
			name: "zero-filled last line",
			setup: func(t *testing.T, dir string) {
				path := filepath.Join(dir, log0)
				lines := readLines(t, path)
				writeFile(t, path, lines[0]+"\n"+lines[1]+"\n"+strings.Repeat("\x00", len(lines[2]))+"\n")
			},
			wantNote: "adopted part-000002.jsonl (10 records)",
			want:     []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl", "part-000003.jsonl"},
		},
		{
			name: "log shards also in manifest.json",
			setup: func(t *testing.T, dir string) {
				m, err := ReadManifest(dir) // the log folded in, the log kept
				if err != nil {
					t.Fatal(err)
				}
				if err := writeManifest(dir, m); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl", "part-000003.jsonl"},
		},
		{
			name: "log shard missing on disk",
			setup: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "data", "part-000001.jsonl"))
			},
			refuse: "part-000001.jsonl (10 records)",
		},
		{
			name: "log shard missing on disk, forced",
			setup: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "data", "part-000001.jsonl"))
			},
			force:    true,
			wantNote: "lost part-000001.jsonl (10 records)",
			want:     []string{"part-000000.jsonl", "part-000002.jsonl", "part-000003.jsonl"},
		},
		{
			name: "log shard changed on disk",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "data", "part-000002.jsonl"), jsonLines(t, 20, 29))
			},
			refuse: "part-000002.jsonl: 9 records on disk, 10 in the manifest",
		},
		{
			name: "complete line that is not a shard",
			setup: func(t *testing.T, dir string) {
				appendBytes(t, filepath.Join(dir, log0), "garbage\n")
			},
			refuse: log0 + ":4",
		},
		{
			name: "log the manifest does not name",
			setup: func(t *testing.T, dir string) {
				// A crash after the compacted manifest, before the log's
				// removal: manifest.json lists the parts and names no log.
				m, err := ReadManifest(dir)
				if err != nil {
					t.Fatal(err)
				}
				m.Parts = m.Parts[:1] // and it let part-000001..2 go
				m.PartLog = ""
				if err := writeManifest(dir, m); err != nil {
					t.Fatal(err)
				}
			},
			wantNote: "adopted part-000001.jsonl",
			want:     []string{"part-000000.jsonl", "part-000001.jsonl", "part-000002.jsonl", "part-000003.jsonl"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			crashedAfter(t, dir, FormatJSONL, 35)
			tt.setup(t, dir)
			opts := testOptions(dir, FormatJSONL)
			opts.Force = tt.force
			before := fileHashes(t, dir)
			kept := func(h map[string][32]byte) map[string][32]byte {
				// Recovery settles data/ before it reconciles; the manifest
				// and the log stay as they were when it refuses.
				return map[string][32]byte{ManifestName: h[filepath.Join(dir, ManifestName)], log0: h[filepath.Join(dir, log0)]}
			}
			s, err := Open(opts)
			if tt.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("Open = %v, want a refusal naming %q", err, tt.refuse)
				}
				if after := fileHashes(t, dir); !maps.Equal(kept(before), kept(after)) {
					t.Error("a refused Open changed the manifest or the log")
				}
				if rep := mustInspect(t, dir); rep.OK {
					t.Error("the audit finds nothing wrong in a directory a run refuses")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := s.Manifest()
			if got := partNames(m.Parts); !slices.Equal(got, tt.want) {
				t.Errorf("manifest lists %v, want %v", got, tt.want)
			}
			if notes := strings.Join(m.Runs[len(m.Runs)-1].Notes, "\n"); !strings.Contains(notes, tt.wantNote) {
				t.Errorf("notes %q do not contain %q", notes, tt.wantNote)
			}
			raw := rawManifest(t, dir)
			if !slices.Equal(partNames(raw.Parts), tt.want) || raw.PartLog != partLogName(1) {
				t.Errorf("manifest.json after Open lists %v and names %q: the log is not folded in", partNames(raw.Parts), raw.PartLog)
			}
			if logs := partLogs(t, dir); len(logs) != 0 {
				t.Errorf("old logs left after the compaction: %v", logs)
			}
			for i := range 50 {
				if r := testRecord(i); !skip(s, r.Key()) {
					if err := s.Write(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			assertExactlyOnce(t, dir, keysOf(0, 50))
			if rep := mustInspect(t, dir); !rep.OK {
				t.Errorf("audit: %v", rep.Problems)
			}
		})
	}
}

// killAtRemove runs fn, killed just before it removes the file at path.
func killAtRemove(t *testing.T, path string, fn func()) {
	t.Helper()
	stepHook = func(op, p string) {
		if op == "remove" && p == path {
			panic(errKilled)
		}
	}
	defer func() {
		stepHook = nil
		if r := recover(); r != errKilled {
			t.Fatalf("not killed before removing %s (recovered %v)", path, r)
		}
	}()
	fn()
}

// TestPartLogKilledBetweenCompactionAndRemoval: a crash after the rename
// of the compacted manifest and before the removal of the log it folded,
// at Close and at Open. The log is then stale: it must neither refuse the
// directory nor bring back a part whose loss --force accepted.
func TestPartLogKilledBetweenCompactionAndRemoval(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		dir := t.TempDir()
		s := mustOpen(t, testOptions(dir, FormatJSONL))
		writeRange(t, s, 0, 25)
		killAtRemove(t, filepath.Join(dir, partLogName(0)), func() { _ = s.Close() })
		crash(s)
		if raw := rawManifest(t, dir); raw.PartLog != "" || len(raw.Parts) != 3 {
			t.Fatalf("the compacted manifest names %q and lists %v", raw.PartLog, partNames(raw.Parts))
		}
		if r := mustInspect(t, dir); !r.OK || !strings.Contains(strings.Join(r.Notes, "\n"), partLogName(0)+" is a shard log") {
			t.Errorf("audit of a stale log: problems %v, notes %v", r.Problems, r.Notes)
		}
		s = mustOpen(t, testOptions(dir, FormatJSONL))
		if s.DoneCount() != 25 || len(s.Manifest().Parts) != 3 {
			t.Errorf("after resume: %d done, %d shards, want 25 and 3", s.DoneCount(), len(s.Manifest().Parts))
		}
		if logs := partLogs(t, dir); len(logs) != 0 {
			t.Errorf("stale log left: %v", logs)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("forced open", func(t *testing.T) {
		dir := t.TempDir()
		crashedAfter(t, dir, FormatJSONL, 25)
		os.Remove(filepath.Join(dir, "data", "part-000000.jsonl"))
		opts := testOptions(dir, FormatJSONL)
		opts.Force = true
		killAtRemove(t, filepath.Join(dir, partLogName(0)), func() { _, _ = Open(opts) })
		// The killed Open's lock went with its process.
		s, err := Open(testOptions(dir, FormatJSONL))
		if err != nil {
			t.Fatalf("the stale log brought back the shard whose loss was accepted: %v", err)
		}
		if got := partNames(s.Manifest().Parts); !slices.Equal(got, []string{"part-000001.jsonl", "part-000002.jsonl"}) {
			t.Errorf("manifest lists %v", got)
		}
		writeRange(t, s, 0, 10)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		assertExactlyOnce(t, dir, keysOf(0, 25))
	})
}
