package audit

import (
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// wantDuplicates is what an index of keys (not fingerprints) reports:
// every key of the files, in the audit's file order, and each key held
// more than once with its files in that order, sorted by key.
func wantDuplicates(t *testing.T, files []string) []Duplicate {
	t.Helper()
	where := map[sink.Key][]string{}
	for _, f := range files {
		if err := sink.ForEachRecord(f, func(rec *sink.Record, _ sink.Span) error {
			where[rec.Key()] = append(where[rec.Key()], f)
			return nil
		}); err != nil {
			t.Fatalf("read keys of %s: %v", f, err)
		}
	}
	out := []Duplicate{}
	for k, fs := range where {
		if len(fs) > 1 {
			out = append(out, Duplicate{ID: k.ID, Sample: k.Sample, Files: fs})
		}
	}
	slices.SortFunc(out, func(a, b Duplicate) int {
		return sink.CompareKeys(sink.Key{ID: a.ID, Sample: a.Sample}, sink.Key{ID: b.ID, Sample: b.Sample})
	})
	return out
}

// TestInspectDuplicatesInDir: keys held twice inside one directory (a part
// copied whole, a line copied into a part of its own, a line twice in one
// file) are listed with their ids and files as the key index listed them.
func TestInspectDuplicatesInDir(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			writeInspectDir(t, dir, format, 0, 40)
			data := filepath.Join(dir, "data")
			copyFile(t, filepath.Join(data, "part-000002."+format), filepath.Join(data, "part-000008."+format))
			// Records 5 and 6 of part 0 as JSONL lines, 6 twice in one file.
			var l5, l6 string
			if err := sink.ForEachRecord(filepath.Join(data, "part-000000."+format), func(rec *sink.Record, _ sink.Span) error {
				switch rec.ID {
				case "5":
					l5 = mustJSON(t, rec)
				case "6":
					l6 = mustJSON(t, rec)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			putFile(t, filepath.Join(data, "part-000009.jsonl"), l5+"\n"+l6+"\n"+l6+"\n")
			r := mustAudit(t, dir)
			want := wantDuplicates(t, r.Files())
			if len(want) != 12 {
				t.Fatalf("planted 12 duplicate keys, the reference finds %d", len(want))
			}
			if !reflect.DeepEqual(r.Duplicates, want) {
				t.Errorf("duplicates\n got %+v\nwant %+v", r.Duplicates, want)
			}
			if r.Distinct != 40 || r.Records != 53 {
				t.Errorf("distinct %d records %d, want 40 and 53", r.Distinct, r.Records)
			}
			six := Duplicate{ID: "6", Sample: 0, Files: []string{
				filepath.Join(data, "part-000000."+format),
				filepath.Join(data, "part-000009.jsonl"), filepath.Join(data, "part-000009.jsonl")}}
			if i := slices.IndexFunc(r.Duplicates, func(d Duplicate) bool { return d.ID == "6" }); i < 0 || !reflect.DeepEqual(r.Duplicates[i], six) {
				t.Errorf("key 6: %+v, want %+v", r.Duplicates, six)
			}
			all := strings.Join(r.Problems, "\n")
			if !strings.Contains(all, "10 duplicate keys in ") || !strings.Contains(all, `duplicate key id="5" sample=1 in `) {
				t.Errorf("problems: %s", all)
			}
		})
	}
}

// TestCombineDuplicatesAcrossDirs: keys held once in each of two
// directories are no duplicate in either audit; Combine finds them in the
// merge of the directories' sorted key indexes, each with its own id and
// its files.
func TestCombineDuplicatesAcrossDirs(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			a, b := t.TempDir(), t.TempDir()
			writeInspectDir(t, a, format, 0, 40)
			writeInspectDir(t, b, format, 40, 70)
			da, db := filepath.Join(a, "data"), filepath.Join(b, "data")
			// a's part 1 copied whole into b: ten keys once in each.
			copyFile(t, filepath.Join(da, "part-000001."+format), filepath.Join(db, "part-000009."+format))
			// a's part 2 twice in a and once in b: named inside a.
			copyFile(t, filepath.Join(da, "part-000002."+format), filepath.Join(da, "part-000008."+format))
			copyFile(t, filepath.Join(da, "part-000002."+format), filepath.Join(db, "part-000010."+format))
			// b's part 0 into a as well, the other way round.
			copyFile(t, filepath.Join(db, "part-000000."+format), filepath.Join(da, "part-000007."+format))
			ra, rb := mustAudit(t, a), mustAudit(t, b)
			if len(ra.Duplicates) != 10 || len(rb.Duplicates) != 0 {
				t.Fatalf("a has %d duplicates, b %d; want 10 and 0", len(ra.Duplicates), len(rb.Duplicates))
			}
			c, err := Combine(ra, rb)
			if err != nil {
				t.Fatal(err)
			}
			want := wantDuplicates(t, c.Files())
			if len(want) != 30 {
				t.Fatalf("planted 30 duplicate keys, the reference finds %d", len(want))
			}
			if !reflect.DeepEqual(c.Duplicates, want) {
				t.Errorf("duplicates\n got %+v\nwant %+v", c.Duplicates, want)
			}
			if c.Distinct != 70 {
				t.Errorf("distinct %d, want 70", c.Distinct)
			}
			// Every key is found by its name, whichever audit held it.
			for i := range 70 {
				if !has(t, c, sink.Key{ID: strconv.Itoa(i), Sample: i % 2}) {
					t.Errorf("combined audit lacks key %d", i)
				}
			}
			// The three sets of files each make one problem; the
			// duplicates inside a alone are a's problem, not here.
			if len(c.Problems) != 3 {
				t.Errorf("problems %q, want 3", c.Problems)
			}
		})
	}
}

// TestCombineDuplicateFilesChanged: Combine names a cross-directory
// duplicate from the keys the audits read, not from the files again: files
// rewritten after the audits change nothing in what it reports.
func TestCombineDuplicateFilesChanged(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 20)
	writeInspectDir(t, b, sink.FormatJSONL, 20, 30)
	orig := filepath.Join(a, "data", "part-000000.jsonl")
	line := readLines(t, orig)[4]
	copied := filepath.Join(b, "data", "part-000007.jsonl")
	putFile(t, copied, line+"\n")
	ra, rb := mustAudit(t, a), mustAudit(t, b)
	other := readLines(t, filepath.Join(a, "data", "part-000001.jsonl"))[0]
	putFile(t, orig, other+"\n")
	putFile(t, copied, other+"\n")
	c, err := Combine(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	want := []Duplicate{{ID: "4", Sample: 0, Files: []string{orig, copied}}}
	if !reflect.DeepEqual(c.Duplicates, want) || c.DuplicateKeys != 1 || len(c.Problems) != 1 {
		t.Errorf("duplicates %+v (%d), problems %q; want %+v and one problem", c.Duplicates, c.DuplicateKeys, c.Problems, want)
	}
}

// TestKeyIndexSpills: with a key index budget of a few keys, every
// directory's index is many sorted runs on disk, and the audits and their
// combination find what they find in memory; past maxListed the
// duplicates are counted, not listed, and a note says so.
func TestKeyIndexSpills(t *testing.T) {
	defer func(b, m int) { KeyBudget, maxListed = b, m }(KeyBudget, maxListed)
	KeyBudget, maxListed = 200, 4
	a, b := t.TempDir(), t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 40)
	writeInspectDir(t, b, sink.FormatJSONL, 40, 70)
	copyFile(t, filepath.Join(a, "data", "part-000001.jsonl"), filepath.Join(b, "data", "part-000009.jsonl"))
	ra, rb := mustAudit(t, a), mustAudit(t, b)
	if ra.index.Runs() != 1 || rb.index.Runs() < 2 {
		t.Fatalf("%d and %d runs: want one for the directory written in key order, several for the one with a copy out of order", ra.index.Runs(), rb.index.Runs())
	}
	c, err := Combine(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	want := wantDuplicates(t, c.Files())
	if c.DuplicateKeys != int64(len(want)) || !reflect.DeepEqual(c.Duplicates, want[:4]) {
		t.Errorf("duplicates %+v (%d in all), want the first 4 of %+v", c.Duplicates, c.DuplicateKeys, want)
	}
	if c.Distinct != 70 || len(c.Problems) != 1 || !slices.ContainsFunc(c.Notes, func(n string) bool { return strings.Contains(n, "not listed") }) {
		t.Errorf("distinct %d, problems %q, notes %q; want 70, one problem, a note of the keys not listed", c.Distinct, c.Problems, c.Notes)
	}
	for i := range 70 {
		if !has(t, c, sink.Key{ID: strconv.Itoa(i), Sample: i % 2}) {
			t.Fatalf("combined audit lacks key %d", i)
		}
	}
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
}
