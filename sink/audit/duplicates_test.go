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
// directories have no name in either audit; Combine finds them by reading
// the files again, and each must carry its own id (a key named after
// another one's fingerprint fails here).
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
				if !c.Has(sink.Key{ID: strconv.Itoa(i), Sample: i % 2}) {
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

// TestCombineDuplicateFilesChanged: when the files of a cross-directory
// duplicate no longer hold the key by the time Combine looks its name up,
// Combine says so and names them instead of reporting a wrong id.
func TestCombineDuplicateFilesChanged(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 20)
	writeInspectDir(t, b, sink.FormatJSONL, 20, 30)
	line := readLines(t, filepath.Join(a, "data", "part-000000.jsonl"))[4]
	copied := filepath.Join(b, "data", "part-000007.jsonl")
	putFile(t, copied, line+"\n")
	ra, rb := mustAudit(t, a), mustAudit(t, b)
	other := readLines(t, filepath.Join(a, "data", "part-000001.jsonl"))[0]
	putFile(t, filepath.Join(a, "data", "part-000000.jsonl"), other+"\n")
	putFile(t, copied, other+"\n")
	_, err := Combine(ra, rb)
	if err == nil || !strings.Contains(err.Error(), copied) || !strings.Contains(err.Error(), "inspect again") {
		t.Errorf("err = %v, want one naming %s", err, copied)
	}
}
