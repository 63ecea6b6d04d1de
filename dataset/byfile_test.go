package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/readcount"
)

// fileDataset writes files part-00.jsonl ... of rows prompt rows each
// (file i has rows+i rows, so that files differ) under dir/sub and returns
// the glob.
func fileDataset(t *testing.T, files, rows int) (glob string, paths []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sub")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		var b strings.Builder
		for r := range rows + i {
			fmt.Fprintf(&b, `{"prompt":"file %d row %d"}`+"\n", i, r)
		}
		paths = append(paths, writeFile(t, dir, fmt.Sprintf("part-%02d.jsonl", i), b.String()))
	}
	return filepath.Join(dir, "part-*.jsonl"), paths
}

// TestShardByFileReadsOnlyItsFiles: split by file, shard i of n opens,
// stamps, counts and reads the files whose place is i mod n and no other
// (the bytes read from each file are counted); its ids are NAME:ROW; the
// shards' ids are disjoint and together the ids of one reader of the whole
// dataset split by file; the limit takes each file's first rows.
func TestShardByFileReadsOnlyItsFiles(t *testing.T) {
	const files, n = 10, 3
	glob, paths := fileDataset(t, files, 4)
	opts := func(i int, limit int64) Options {
		sh := Shard{}
		if n > 1 {
			sh = Shard{Index: i, Count: n}
		}
		return Options{Selection: Selection{Path: glob, Format: FormatPrompt, ShardBy: ShardFiles, Shard: sh, Limit: limit}}
	}
	whole := Options{Selection: Selection{Path: glob, Format: FormatPrompt, ShardBy: ShardFiles}}
	all, bad := readAll(t, whole)
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	if all[0].ID != "part-00.jsonl:0" || all[len(all)-1].ID != "part-09.jsonl:12" {
		t.Fatalf("ids %q ... %q, want part-00.jsonl:0 ... part-09.jsonl:12", all[0].ID, all[len(all)-1].ID)
	}
	var union []string
	for i := range n {
		c, stop := readcount.Start()
		o := opts(i, 0)
		stamp, err := Stamp(o)
		if err != nil {
			t.Fatal(err)
		}
		count, err := Count(o)
		if err != nil {
			t.Fatal(err)
		}
		got, bad := readAll(t, o)
		stop()
		if len(bad) > 0 {
			t.Fatal(bad)
		}
		var want []string
		var mine []string
		for f, p := range paths {
			abs, _ := filepath.Abs(p)
			read := c.Bytes()[abs]
			st, _ := os.Stat(p)
			if f%n == i {
				mine = append(mine, filepath.Base(p))
				// Stamp reads it once; Count takes Stamp's count; the
				// reader reads it once more.
				if read != 2*st.Size() {
					t.Errorf("shard %d/%d read %d bytes of its %s (%d bytes), want twice its size", i, n, read, p, st.Size())
				}
				for r := range 4 + f {
					want = append(want, fmt.Sprintf("part-%02d.jsonl:%d", f, r))
				}
			} else if read != 0 || c.Opened()[abs] != 0 {
				t.Errorf("shard %d/%d opened %s, another shard's, and read %d bytes of it", i, n, p, read)
			}
		}
		if g := ids(got); !slices.Equal(g, want) {
			t.Errorf("shard %d/%d ids %q, want %q", i, n, g, want)
		}
		if count != int64(len(want)) {
			t.Errorf("shard %d/%d: Count %d, read %d", i, n, count, len(want))
		}
		var stamped []string
		for _, s := range stamp {
			stamped = append(stamped, s.Name)
		}
		if !slices.Equal(stamped, mine) {
			t.Errorf("shard %d/%d stamped %q, want its files %q", i, n, stamped, mine)
		}
		for _, p := range got {
			if !o.Contains(p.Index) {
				t.Errorf("shard %d/%d: row %s (index %d) is not in its selection", i, n, p.ID, p.Index)
			}
			if opts((i+1)%n, 0).Contains(p.Index) {
				t.Errorf("row %s of shard %d/%d is in shard %d's selection too", p.ID, i, n, (i+1)%n)
			}
		}
		union = append(union, ids(got)...)
	}
	slices.SortFunc(union, func(a, b string) int { return strings.Compare(a, b) })
	wantAll := ids(all)
	slices.SortFunc(wantAll, func(a, b string) int { return strings.Compare(a, b) })
	if !slices.Equal(union, wantAll) {
		t.Errorf("the shards' ids are not the whole dataset's:\n got %q\nwant %q", union, wantAll)
	}

	// The limit is each file's: 2 rows of each of shard 1's files.
	o := opts(1, 2)
	got, _ := readAll(t, o)
	if g := ids(got); !slices.Equal(g, []string{"part-01.jsonl:0", "part-01.jsonl:1", "part-04.jsonl:0", "part-04.jsonl:1", "part-07.jsonl:0", "part-07.jsonl:1"}) {
		t.Errorf("limit 2 by file: %q", g)
	}
	if c, err := Count(o); err != nil || c != 6 {
		t.Errorf("Count with limit 2 by file: %d, %v; want 6", c, err)
	}

	// More shards than files: the shards past the last file take none.
	if _, err := Open(Options{Selection: Selection{Path: glob, ShardBy: ShardFiles, Shard: Shard{Index: 10, Count: 11}}}); err == nil ||
		!strings.Contains(err.Error(), "takes no file") || !strings.Contains(err.Error(), "at most 10 shards") {
		t.Errorf("shard 10/11 of 10 files: %v, want an error saying it takes no file", err)
	}
}

// TestStampTrustsKnown: a file stamped before, with the path, size,
// modification time and inode it had, is not read again (its hash and
// rows taken on trust, Count reading nothing either); a file touched since
// is read again; Known empty reads every byte.
func TestStampTrustsKnown(t *testing.T) {
	glob, paths := fileDataset(t, 3, 5)
	o := Options{Selection: Selection{Path: glob, Format: FormatPrompt}}
	first, err := Stamp(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range first {
		if s.Path == "" || s.ModTime.IsZero() || s.Rows == 0 {
			t.Fatalf("stamp %+v lacks what a later stamp trusts it by", s)
		}
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(paths[1], later, later); err != nil {
		t.Fatal(err)
	}
	rowCounts.Lock()
	clear(rowCounts.m) // a new process: nothing counted in this one
	rowCounts.Unlock()
	c, stop := readcount.Start()
	o.Known = first
	again, err := Stamp(o)
	if err == nil {
		_, err = Count(o)
	}
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if again.Identity() != first.Identity() {
		t.Errorf("the trusted stamp %s differs from the first %s", again, first)
	}
	for i, p := range paths {
		abs, _ := filepath.Abs(p)
		st, _ := os.Stat(p)
		want := int64(0)
		if i == 1 {
			want = st.Size() // touched: hashed and counted again, once
		}
		if got := c.Bytes()[abs]; got != want {
			t.Errorf("%s: %d bytes read, want %d", p, got, want)
		}
	}
	c, stop = readcount.Start()
	o.Known = nil
	if _, err := Stamp(o); err != nil {
		t.Fatal(err)
	}
	stop()
	for _, p := range paths {
		abs, _ := filepath.Abs(p)
		st, _ := os.Stat(p)
		if got := c.Bytes()[abs]; got != st.Size() {
			t.Errorf("without Known, %s: %d bytes read, want all %d", p, got, st.Size())
		}
	}
}

// TestStampCountsCompressedRows: a gzip or zstd JSONL file's rows are
// counted on the stamp's read, so that Count does not decompress it again.
func TestStampCountsCompressedRows(t *testing.T) {
	for _, ext := range []string{".gz", ".zst"} {
		path := writeFile(t, t.TempDir(), "d.jsonl"+ext, "\xEF\xBB\xBF{\"prompt\":\"a\"}\n\n{\"prompt\":\"b\"}\n{\"prompt\":\"c\"}")
		o := Options{Selection: Selection{Path: path, Format: FormatPrompt}}
		st, err := Stamp(o)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Rows != 3 {
			t.Errorf("%s: stamp counted %d rows, want 3", ext, st[0].Rows)
		}
		c, stop := readcount.Start()
		n, err := Count(o)
		stop()
		if err != nil || n != 3 {
			t.Errorf("%s: Count %d, %v; want 3", ext, n, err)
		}
		if b := c.Bytes(); len(b) != 0 {
			t.Errorf("%s: Count read %v after the stamp counted", ext, b)
		}
	}
}

// TestFileNames: a file's name is its path from the deepest directory
// holding every file, whatever the spelling of the paths.
func TestFileNames(t *testing.T) {
	for _, c := range []struct{ paths, want []string }{
		{[]string{"/data/p/a.jsonl"}, []string{"a.jsonl"}},
		{[]string{"/data/p/a.jsonl", "/data/p/b.jsonl"}, []string{"a.jsonl", "b.jsonl"}},
		{[]string{"/data/en/1.jsonl", "/data/fr/1.jsonl"}, []string{"en/1.jsonl", "fr/1.jsonl"}},
		{[]string{"/data/p/a.jsonl", "/data/p/q/b.jsonl"}, []string{"a.jsonl", "q/b.jsonl"}},
		{[]string{"en/1.jsonl", "fr/1.jsonl"}, []string{"en/1.jsonl", "fr/1.jsonl"}},
		{[]string{"/a.jsonl", "/b.jsonl"}, []string{"a.jsonl", "b.jsonl"}},
	} {
		if got := FileNames(c.paths); !slices.Equal(got, c.want) {
			t.Errorf("FileNames(%q) = %q, want %q", c.paths, got, c.want)
		}
	}
}

// TestStampDistrustsAnInPlaceEdit: a file rewritten in place with bytes of
// the same size, its modification time set back (touch -r), has the path,
// size, modification time and inode it had; its change time moved, which
// no user can set back, so it is hashed again and its new identity found.
func TestStampDistrustsAnInPlaceEdit(t *testing.T) {
	glob, paths := fileDataset(t, 2, 3)
	o := Options{Selection: Selection{Path: glob, Format: FormatPrompt}}
	first, err := Stamp(o)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "row 0", "row X", 1)
	// Written in place (the same inode) until the change time moved: the
	// kernel's file clock ticks every few milliseconds, and an edit within
	// the tick of the file's creation is not one this test can show.
	for changed := false; !changed; {
		f, err := os.OpenFile(paths[0], os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(edited); err != nil {
			t.Fatal(err)
		}
		now, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		changed = !changeTime(now).Equal(changeTime(st)) || changeTime(now).IsZero()
	}
	if err := os.Chtimes(paths[0], st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	o.Known = first
	again, err := Stamp(o)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].XXH64 == first[0].XXH64 {
		t.Errorf("the edited file kept its hash %s: its stamp was trusted", first[0].XXH64)
	}
	if again[1].XXH64 != first[1].XXH64 {
		t.Errorf("the untouched file's hash changed")
	}
}
