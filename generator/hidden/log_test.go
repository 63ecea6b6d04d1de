package hidden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// TestLogTornTail: a kill mid-append leaves a line without its newline;
// ReadLog leaves it out without touching the file, OpenLog cuts it so the
// next mark starts a line of its own. A bad complete line is an error
// naming the file and line.
func TestLogTornTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LogName)
	good := `{"id":"a","sample":0,"turn":-1,"file":"a.s0.safetensors","tokens":3,"bytes":100}` + "\n"
	torn := `{"id":"b","sample":0,"turn":-1,"fi`
	if err := os.WriteFile(path, []byte(good+torn), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadLog(dir)
	if err != nil || len(r.Files()) != 1 || r.Bytes() != 100 {
		t.Fatalf("ReadLog: %v, %v", r, err)
	}
	if b, _ := os.ReadFile(path); string(b) != good+torn {
		t.Fatal("ReadLog changed the file")
	}
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Mark(Entry{ID: "b", Turn: -1, File: "b.s0.safetensors", Tokens: 1, Bytes: 50}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, err = OpenLog(dir)
	if err != nil || len(l.Files()) != 2 || l.Bytes() != 150 {
		t.Fatalf("after the mark: %v, %v", l.Files(), err)
	}
	l.Close()
	if err := os.WriteFile(path, []byte(good+"{nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLog(dir); err == nil || !strings.Contains(err.Error(), LogName+":2") {
		t.Errorf("ReadLog of a bad line = %v, want it named", err)
	}
}

// TestFileName: ids become safe, distinct file names.
func TestFileName(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"17", "a/b", "a%2Fb", ".hidden", "x y", strings.Repeat("z", 300), strings.Repeat("z", 299) + "y", "data/a.jsonl:10"} {
		for _, turn := range []int{-1, 0, 1} {
			u := Unit{Key: sink.Key{ID: id}, Turn: turn}
			n := u.FileName()
			if strings.ContainsAny(n, "/ ") || strings.HasPrefix(n, ".") || len(n) > 255 {
				t.Errorf("%q turn %d: unsafe name %q", id, turn, n)
			}
			if other, ok := seen[n]; ok {
				t.Errorf("%q and %s share %q", id, other, n)
			}
			seen[n] = id
		}
	}
}

// TestCopyAcrossFilesystems: the copy a move falls back to across
// filesystems gives the final name whole and leaves no temporary.
func TestCopyAcrossFilesystems(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "a.safetensors"), filepath.Join(t.TempDir(), "b.safetensors")
	data := []byte(strings.Repeat("states", 1000))
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != string(data) {
		t.Fatalf("copy: %d bytes, %v", len(b), err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	if len(ents) != 1 {
		t.Errorf("%d entries beside the copy, want none", len(ents)-1)
	}
}

// TestLogBrokenAfterFailedAppend: once an append fails (a part of a line
// may be on disk), no later mark is taken in this process, so no line can
// follow a torn one.
func TestLogBrokenAfterFailedAppend(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Mark(Entry{ID: "a", Turn: -1, File: "a.s0.safetensors", Bytes: 1}); err != nil {
		t.Fatal(err)
	}
	l.f.Close() // the next write fails, as on a failing disk
	if err := l.Mark(Entry{ID: "b", Turn: -1, File: "b.s0.safetensors", Bytes: 1}); err == nil {
		t.Fatal("a mark on a failed log succeeded")
	}
	if err := l.Mark(Entry{ID: "c", Turn: -1, File: "c.s0.safetensors", Bytes: 1}); err == nil {
		t.Fatal("a mark after a failed append succeeded")
	}
	r, err := ReadLog(dir)
	if err != nil || len(r.Files()) != 1 {
		t.Fatalf("log after the failure: %v, %v", r.Files(), err)
	}
}
