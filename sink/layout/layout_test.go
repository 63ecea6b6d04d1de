package layout

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPaths: every path the directory holds is DIR joined with its one
// name, so a package that asks layout writes where every other reads.
func TestPaths(t *testing.T) {
	d := Dir("/out/run1")
	for _, c := range []struct{ got, want string }{
		{d.Manifest(), "/out/run1/manifest.json"},
		{d.Lock(), "/out/run1/.lock"},
		{d.Status(), "/out/run1/status.json"},
		{d.Report(), "/out/run1/report.json"},
		{d.History(), "/out/run1/history.jsonl"},
		{d.Batches(), "/out/run1/batches.json"},
		{d.BatchFiles(), "/out/run1/batches"},
		{d.Data(), "/out/run1/data"},
		{d.Errors(), "/out/run1/errors"},
		{d.DataPart("part-000001.jsonl"), "/out/run1/data/part-000001.jsonl"},
		{d.ErrorsPart("part-000002.jsonl"), "/out/run1/errors/part-000002.jsonl"},
		{d.PartLog(3), "/out/run1/manifest.shards.3.jsonl"},
		{d.Hidden(), "/out/run1/hidden"},
		{d.HiddenFile("7", 0, 1), "/out/run1/hidden/7.0.1.safetensors"},
		{d.Leftovers(StatusName), "/out/run1/.status.json.*.tmp"},
		{d.Path(), "/out/run1"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// TestClassify: each name a run keeps is known, batches.json among them
// (the list sink kept by hand had missed it); a stranger's file is
// Foreign.
func TestClassify(t *testing.T) {
	for name, want := range map[string]Kind{
		ManifestName: Output, DataName: Output, ErrorsName: Output,
		LockName: Beside, StatusName: Beside, ReportName: Beside, HistoryName: Beside,
		BatchesName: Beside, BatchFilesName: Beside, HiddenName: Beside,
		PartLogName(0): Beside, PartLogName(12): Beside, ".status.json.123.tmp": Beside,
		"notes.txt": Foreign, "batches.json.bak": Foreign, "manifest.shards.x.jsonl": Foreign,
		"data.csv": Foreign, "manifest.json~": Foreign,
	} {
		if got := Classify(name); got != want {
			t.Errorf("Classify(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestIsPartLog(t *testing.T) {
	for _, run := range []int{0, 1, 99, 123456} {
		if !IsPartLog(PartLogName(run)) {
			t.Errorf("IsPartLog(PartLogName(%d)) = false", run)
		}
	}
	for _, name := range []string{"manifest.shards..jsonl", "manifest.shards.1.json", "xmanifest.shards.1.jsonl", "manifest.shards.1.jsonl.tmp"} {
		if IsPartLog(name) {
			t.Errorf("IsPartLog(%q) = true", name)
		}
	}
}

// TestHiddenFileName: ids of every shape give one file name each, inside
// DIR/hidden, and distinct keys distinct names.
func TestHiddenFileName(t *testing.T) {
	for _, c := range []struct {
		id           string
		sample, turn int
		want         string
	}{
		{"42", 0, 0, "42.0.0.safetensors"},
		{"data/a.jsonl:10", 2, 3, "data%2Fa%2Ejsonl%3A10.2.3.safetensors"},
		{"..", 0, 0, "%2E%2E.0.0.safetensors"},
		{"", 1, 0, "~.1.0.safetensors"},
		{"a b", 0, 0, "a%20b.0.0.safetensors"},
	} {
		if got := HiddenFileName(c.id, c.sample, c.turn); got != c.want {
			t.Errorf("HiddenFileName(%q, %d, %d) = %q, want %q", c.id, c.sample, c.turn, got, c.want)
		}
	}
	seen := map[string]string{}
	for _, id := range []string{"a", "A", "a.1", "a%2E1", "a/1", "a:1", "a.0", "a", "", "~", strings.Repeat("x", 400), strings.Repeat("x", 401)} {
		for s := 0; s < 2; s++ {
			name := HiddenFileName(id, s, 0)
			key := id + "#" + string(rune('0'+s))
			if other, ok := seen[name]; ok && other != key {
				t.Errorf("%q and %q share the name %q", other, key, name)
			}
			seen[name] = key
		}
	}
}

// FuzzHiddenFileName: an id is a dataset's (untrusted): whatever it holds,
// its file is one element of DIR/hidden, under the file system's bound,
// and never a dot file (which Classify and cleanup treat as temporaries).
func FuzzHiddenFileName(f *testing.F) {
	for _, id := range []string{"1", "data/a.jsonl:9", "../../etc/passwd", ".hidden", "\x00", strings.Repeat("é", 300)} {
		f.Add(id, 0, 0)
	}
	f.Fuzz(func(t *testing.T, id string, sample, turn int) {
		name := HiddenFileName(id, sample, turn)
		if strings.HasPrefix(name, ".") {
			t.Errorf("HiddenFileName(%q) = %q: a dot file", id, name)
		}
		if strings.ContainsAny(name, "/\\\x00") || filepath.Base(name) != name {
			t.Errorf("HiddenFileName(%q) = %q: not one path element", id, name)
		}
		if len(name) > 255 {
			t.Errorf("HiddenFileName(%q) is %d bytes, over a file name's 255", id, len(name))
		}
		got := filepath.Join("/d", HiddenName, name)
		if filepath.Dir(got) != "/d/hidden" {
			t.Errorf("HiddenFileName(%q) = %q lands at %s", id, name, got)
		}
	})
}
