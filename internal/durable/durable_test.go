package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// record returns a hook that appends "op path" to steps.
func record(steps *[]string) Hook {
	return func(op, path string) { *steps = append(*steps, op+" "+path) }
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	for _, content := range []string{`{"a":1}`, `{"a":2,"longer":true}`, `{}`} {
		if err := WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Fatalf("content = %q, want %q", got, content)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("perm = %v, want 0644", st.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only status.json (no temporary left)", names)
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope", "status.json")
	err := WriteFile(path, []byte("x"), 0o644)
	if err == nil || !strings.Contains(err.Error(), "status.json") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error naming status.json", err)
	}
}

// TestWriteFileSteps: the temporary is written and fsynced before it takes
// the final name, and the directory is fsynced after, so that neither a
// half-written file nor a lost rename can follow a power loss.
func TestWriteFileSteps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manifest.json")
	var steps []string
	if err := record(&steps).WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 5 {
		t.Fatalf("steps:\n%s\nwant create, write, fsync, rename, syncdir", strings.Join(steps, "\n"))
	}
	tmp := strings.TrimPrefix(steps[1], "write ")
	if filepath.Dir(tmp) != dir || !strings.HasPrefix(filepath.Base(tmp), ".manifest.json.") || !strings.HasSuffix(tmp, ".tmp") {
		t.Errorf("temporary %s: want a hidden .tmp file beside the target", tmp)
	}
	want := []string{"create " + path, "write " + tmp, "fsync " + tmp, "rename " + tmp, "syncdir " + dir}
	if !slices.Equal(steps, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
}

// TestWriteFileStoppedLeavesOld: a write stopped at any step (as kill -9
// would) leaves the old content under the final name.
func TestWriteFileStoppedLeavesOld(t *testing.T) {
	for _, at := range []string{"create", "write", "fsync", "rename"} {
		t.Run(at, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			stop := Hook(func(op, _ string) {
				if op == at {
					panic("killed")
				}
			})
			func() {
				defer func() { _ = recover() }()
				_ = stop.WriteFile(path, []byte("new"), 0o644)
			}()
			if b, err := os.ReadFile(path); err != nil || string(b) != "old" {
				t.Errorf("after a stop at %s: %q, %v; want the old content", at, b, err)
			}
		})
	}
}

// TestMkdirAllSyncsParents: every directory created is in its parent's
// fsynced entries; directories that existed are left alone.
func TestMkdirAllSyncsParents(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	var steps []string
	if err := record(&steps).MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("%s not created: %v", dir, err)
	}
	want := []string{"mkdir " + dir,
		"syncdir " + filepath.Join(root, "a", "b"),
		"syncdir " + filepath.Join(root, "a"),
		"syncdir " + root}
	if !slices.Equal(steps, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}

	steps = nil
	if err := record(&steps).MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []string{"mkdir " + dir}) {
		t.Errorf("existing directory: steps %v, want only the mkdir", steps)
	}
}

func TestMkdirAllUnderFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(file, "sub")); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("err = %v, want an error naming %s", err, file)
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := SyncDir(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error naming %s", err, missing)
	}
}

// TestCreateCommitAbort: a streamed file appears under its name only on
// Commit; Abort leaves the old content and no temporary behind.
func TestCreateCommitAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	if err := WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Fatalf("before commit %s holds %q", path, got)
	}
	f.Abort()
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Fatalf("after abort %s holds %q", path, got)
	}
	f, err = Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a\n", "b\n"} {
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a\nb\n" {
		t.Fatalf("after commit %s holds %q", path, got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("a second Commit succeeded")
	}
}
