package dataset

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// readRepeating reads opts with a RepeatFunc that remembers every id it was
// asked about, as a run's producer does with the keys it asked.
func readRepeating(t *testing.T, opts Options) ([]Prompt, []*RowError) {
	t.Helper()
	var bad []*RowError
	opts.OnSkip = func(e *RowError) { bad = append(bad, e) }
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]bool{}
	r.SetRepeat(func(id string, _ int64, _ bool) bool {
		had := seen[id]
		seen[id] = true
		return had
	})
	var ps []Prompt
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if int(r.Skipped()) != len(bad) {
		t.Errorf("Skipped() %d, %d rows reported", r.Skipped(), len(bad))
	}
	return ps, bad
}

// A repeated id is a bad row named with its file and line, the field the
// id came from and the line of its first row: a batch file's custom_id (an
// earlier row that is bad otherwise is no first row), an id column, a
// plain row whose index an earlier custom_id spelled; in a Parquet file by
// row. With on_bad_row: fail it stops the read.
func TestRepeatedIDIsABadRow(t *testing.T) {
	dir := t.TempDir()
	batch := func(id, q string) string {
		return fmt.Sprintf(`{"custom_id":%q,"body":{"messages":[{"role":"user","content":%q}]}}`, id, q)
	}
	cases := []struct {
		name string
		opts Options
		data string
		ids  []string
		bad  []string
	}{
		{"custom_id", Options{}, strings.Join([]string{
			batch("r1", "a"), batch("r2", "b"), `{"custom_id":"r3","body":{"messages":42}}`, "",
			batch("r3", "c"), batch("r1", "d"), batch("r3", "e"),
		}, "\n") + "\n", []string{"r1", "r2", "r3"}, []string{
			`F:3: body.messages: not a list`,
			`F:6: custom_id: repeats the id "r1" of F:1 (each id is asked once, by its first row)`,
			`F:7: custom_id: repeats the id "r3" of F:5 (each id is asked once, by its first row)`,
		}},
		{"id column", Options{Selection: Selection{IDField: "uid"}}, strings.Join([]string{
			`{"uid":7,"prompt":"a"}`, `{"uid":"x","prompt":"b"}`, `{"uid":7.0,"prompt":"c"}`,
		}, "\n") + "\n", []string{"7", "x"}, []string{
			`F:3: uid: repeats the id "7" of F:1 (each id is asked once, by its first row)`,
		}},
		{"index spelled by a custom_id", Options{}, strings.Join([]string{
			batch("2", "a"), `{"prompt":"b"}`, `{"prompt":"c"}`,
		}, "\n") + "\n", []string{"2", "1"}, []string{
			`F:3: repeats the id "2" of F:1 (each id is asked once, by its first row)`,
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, dir, fmt.Sprintf("d%d.jsonl", i), c.data)
			o := c.opts
			o.Path = path
			ps, bad := readRepeating(t, o)
			var ids []string
			for _, p := range ps {
				ids = append(ids, p.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.ids) {
				t.Errorf("ids %v, want %v", ids, c.ids)
			}
			var msgs []string
			for _, e := range bad {
				msgs = append(msgs, strings.ReplaceAll(e.Error(), path, "F"))
			}
			if strings.Join(msgs, "\n") != strings.Join(c.bad, "\n") {
				t.Errorf("bad rows:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(c.bad, "\n"))
			}
			for _, e := range bad[len(bad)-1:] {
				var re *RepeatedIDError
				if !errors.Is(e, ErrRepeatedID) || !errors.As(e, &re) || re.First == "" {
					t.Errorf("%v: not a *RepeatedIDError with its first row", e)
				}
			}

			// on_bad_row: fail stops at the first bad row, a repeat included.
			o.OnBadRow = OnBadRowFail
			r, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			seen := map[string]bool{}
			r.SetRepeat(func(id string, _ int64, _ bool) bool { had := seen[id]; seen[id] = true; return had })
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
			}
			var re *RowError
			if !errors.As(err, &re) || re.Line != bad[0].Line {
				t.Errorf("on_bad_row fail: %v, want the row error of line %d", err, bad[0].Line)
			}
		})
	}

	t.Run("parquet", func(t *testing.T) {
		type row struct {
			UID    string `parquet:"uid"`
			Prompt string `parquet:"prompt"`
		}
		path := filepath.Join(dir, "p.parquet")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[row](f, parquet.MaxRowsPerRowGroup(2))
		if _, err := w.Write([]row{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"b", "4"}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, bad := readRepeating(t, Options{Selection: Selection{Path: path, IDField: "uid"}})
		if len(bad) != 1 || bad[0].Error() != path+`:row 3: uid: repeats the id "b" of `+path+`:row 1 (each id is asked once, by its first row)` {
			t.Errorf("bad rows %v", bad)
		}
	})
}

// Past maxLocated repeats, a repeat is named without its first row: each
// look reads the dataset again.
func TestRepeatedIDsLocatedFirstFew(t *testing.T) {
	var b strings.Builder
	const n = maxLocated + 5
	for i := range n {
		fmt.Fprintf(&b, `{"uid":"u%d","prompt":"p"}`+"\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, `{"uid":"u%d","prompt":"p"}`+"\n", i)
	}
	path := writeFile(t, t.TempDir(), "twice.jsonl", b.String())
	ps, bad := readRepeating(t, Options{Selection: Selection{Path: path, IDField: "uid"}})
	if len(ps) != n || len(bad) != n {
		t.Fatalf("%d prompts, %d bad rows; want %d and %d", len(ps), len(bad), n, n)
	}
	for i, e := range bad {
		var re *RepeatedIDError
		if !errors.As(e, &re) {
			t.Fatalf("%v: not a repeated id", e)
		}
		if located := re.First != ""; located != (i < maxLocated) {
			t.Errorf("repeat %d: first row %q", i, re.First)
		}
		if i < maxLocated && re.First != fmt.Sprintf("%s:%d", path, i+1) {
			t.Errorf("repeat %d: first row %q, want line %d", i, re.First, i+1)
		}
	}
	if want := fmt.Sprintf(`uid: repeats the id "u20" of an earlier row (each id is asked once, by its first row; the first %d repeats name it)`, maxLocated); !strings.HasSuffix(bad[n-1].Error(), want) {
		t.Errorf("unlocated repeat: %v", bad[n-1])
	}
}
