package dataset

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset/stamp"
)

func stampOf(t *testing.T, path string) stamp.Content {
	t.Helper()
	c, err := Stamp(Options{Selection: Selection{Path: path}})
	if err != nil {
		t.Fatalf("Stamp(%s): %v", path, err)
	}
	return c
}

// TestStampIdentityIsTheBytes: a job is the same dataset whatever name its
// files are given by, and another dataset as soon as a byte or the row
// order changes, even when the size does not.
func TestStampIdentityIsTheBytes(t *testing.T) {
	dir := t.TempDir()
	const rows = `{"prompt":"one"}` + "\n" + `{"prompt":"two"}` + "\n"
	abs := writeFile(t, dir, "rows.jsonl", rows)
	base := stampOf(t, abs)
	if len(base) != 1 || base[0].Size != int64(len(rows)) || base[0].Name != "rows.jsonl" {
		t.Fatalf("Stamp = %+v, want one file rows.jsonl of %d bytes", base, len(rows))
	}

	t.Run("relative path", func(t *testing.T) {
		t.Chdir(dir)
		rel := stampOf(t, "rows.jsonl")
		if rel.Identity() != base.Identity() {
			t.Errorf("relative %q, absolute %q", rel.Identity(), base.Identity())
		}
	})
	t.Run("moved under another name", func(t *testing.T) {
		other := writeFile(t, t.TempDir(), "renamed.jsonl", rows)
		if got := stampOf(t, other); got.Identity() != base.Identity() {
			t.Errorf("same bytes under another name: %q, want %q", got.Identity(), base.Identity())
		}
	})

	edits := []struct {
		name string
		data string
	}{
		{"one byte edited in place", `{"prompt":"one"}` + "\n" + `{"prompt":"twO"}` + "\n"},
		{"lines reordered", `{"prompt":"two"}` + "\n" + `{"prompt":"one"}` + "\n"},
		{"a line appended", rows + `{"prompt":"three"}` + "\n"},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "rows.jsonl", e.data)
			got := stampOf(t, p)
			if got.Identity() == base.Identity() {
				t.Errorf("identity %q did not change", got.Identity())
			}
			if e.name != "a line appended" && got[0].Size != base[0].Size {
				t.Fatalf("test data: size %d, want the same %d", got[0].Size, base[0].Size)
			}
		})
	}
}

// TestStampGlobInReadOrder: a glob's files are stamped in the order they
// are read (sorted paths), so the identity follows the row indexes.
func TestStampGlobInReadOrder(t *testing.T) {
	dir := t.TempDir()
	// Written out of order: the directory listing must not decide.
	writeFile(t, dir, "c.jsonl", `{"prompt":"c"}`+"\n")
	writeFile(t, dir, "a.jsonl", `{"prompt":"a"}`+"\n")
	writeFile(t, dir, "b.jsonl", `{"prompt":"bb"}`+"\n")
	c := stampOf(t, filepath.Join(dir, "*.jsonl"))
	var names []string
	for _, f := range c {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "a.jsonl,b.jsonl,c.jsonl" {
		t.Errorf("glob stamped as %v, want a, b, c", names)
	}
	parts := strings.Split(c.Identity(), ";")
	if len(parts) != 3 {
		t.Fatalf("Identity %q: want 3 files", c.Identity())
	}
	a := stampOf(t, filepath.Join(dir, "a.jsonl"))
	if parts[0] != a.Identity() {
		t.Errorf("first file of the glob %q, a.jsonl alone %q", parts[0], a.Identity())
	}

	// Swapping two files' contents keeps the set of bytes but moves rows.
	writeFile(t, dir, "a.jsonl", `{"prompt":"c"}`+"\n")
	writeFile(t, dir, "c.jsonl", `{"prompt":"a"}`+"\n")
	if got := stampOf(t, filepath.Join(dir, "*.jsonl")); got.Identity() == c.Identity() {
		t.Errorf("files swapped, identity unchanged %q", got.Identity())
	}
}

func TestStampMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.jsonl")
	c, err := Stamp(Options{Selection: Selection{Path: missing}})
	if err == nil {
		t.Fatalf("Stamp(%s) = %v, want an error", missing, c)
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q does not name %s", err, missing)
	}
	glob := filepath.Join(t.TempDir(), "*.jsonl")
	if _, err := Stamp(Options{Selection: Selection{Path: glob}}); err == nil || !strings.Contains(err.Error(), glob) {
		t.Errorf("Stamp of a glob matching nothing: %v, want an error naming %s", err, glob)
	}
}

func TestStampHubHasNoContent(t *testing.T) {
	c, err := Stamp(Options{Selection: Selection{Path: "hf://owner/name"}})
	if err != nil || c != nil {
		t.Errorf("Stamp(hf://...) = %v, %v; want nil, nil (the pinned revision is its identity)", c, err)
	}
}

func TestContentString(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.jsonl", `{"prompt":"a"}`+"\n")
	writeFile(t, dir, "b.jsonl", `{"prompt":"b"}`+"\n")
	c := stampOf(t, filepath.Join(dir, "*.jsonl"))
	s := c.String()
	for _, f := range c {
		if !strings.Contains(s, f.Name) || !strings.Contains(s, f.XXH64) {
			t.Errorf("String() = %q, want it to name %s and its hash %s", s, f.Name, f.XXH64)
		}
	}
	if strings.Contains(s, dir) {
		t.Errorf("String() = %q names the directory; names are base names", s)
	}
	if got := stamp.Content(nil).String(); got == "" {
		t.Error("empty Content has an empty String(); a message would show nothing")
	}
}
