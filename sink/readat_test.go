package sink

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// testReadRecordsAt: every record of a part, asked for by its location (a
// JSONL line's offset, a Parquet row) in any order, a few at a time or all,
// is the record ForEachRecord read there; so is a record of the part being
// filled (.open, .journal). A location that holds no record is an error
// naming the file.
func testReadRecordsAt(t *testing.T, format string) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, format))
	writeRange(t, s, 0, 25) // parts 0 and 1 final, part 2 being filled
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		path := filepath.Join(dir, "data", e.Name())
		var want []Record
		var locs []int64
		err := ForEachRecord(path, func(rec *Record, at Span) error {
			want = append(want, *rec)
			if strings.HasSuffix(path, ".parquet") {
				locs = append(locs, int64(len(locs)))
			} else {
				locs = append(locs, at.Offset)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		files++
		rng := rand.New(rand.NewPCG(uint64(len(want)), 7))
		for _, n := range []int{1, 3, len(want)} {
			pick := rng.Perm(len(want))[:n]
			ask := make([]int64, n)
			for i, p := range pick {
				ask[i] = locs[p]
			}
			seen := 0
			err := ReadRecordsAt(path, ask, func(i int, rec *Record) error {
				seen++
				if !reflect.DeepEqual(*rec, want[pick[i]]) {
					t.Errorf("%s at %d: %+v, want %+v", e.Name(), ask[i], *rec, want[pick[i]])
				}
				return nil
			})
			if err != nil || seen != n {
				t.Fatalf("%s: %d of %d read: %v", e.Name(), seen, n, err)
			}
		}
		bad := int64(len(want)) // a row past the end; for JSONL the middle of a line
		if !strings.HasSuffix(path, ".parquet") {
			bad = locs[1] - 3
		}
		err = ReadRecordsAt(path, []int64{bad}, func(int, *Record) error { return nil })
		if err == nil || !strings.Contains(err.Error(), e.Name()) {
			t.Errorf("%s at %d: %v, want an error naming the file", e.Name(), bad, err)
		}
	}
	if files != 3 {
		t.Errorf("%d files read, want two final parts and the one being filled", files)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadRecordsAtRowGroups: rows of a Parquet file of several row groups
// (as another writer, or a large part, makes it) are found across groups,
// backwards too.
func TestReadRecordsAtRowGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part-000000.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[Record](f, parquet.MaxRowsPerRowGroup(4))
	var want []Record
	for i := range 10 {
		want = append(want, *testRecord(i))
	}
	if _, err := w.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	ask := []int64{9, 0, 5, 4, 3, 8}
	err = ReadRecordsAt(path, ask, func(i int, rec *Record) error {
		// Parquet reads an empty list where none was written: compare
		// the JSON a user's script sees.
		got, _ := json.Marshal(rec)
		exp, _ := json.Marshal(want[ask[i]])
		if !bytes.Equal(got, exp) {
			t.Errorf("row %d: %+v\nwant %+v", ask[i], *rec, want[ask[i]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
