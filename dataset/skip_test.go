package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/dataset/internal/rawjson"

	"github.com/synthgen/synthgen/dataset/shape"
)

// readSkipping reads opts with fn installed and returns the prompts, the
// rows skipped as bad, and every (index, id, byIndex) fn was asked about.
func readSkipping(t *testing.T, opts Options, fn func(id string, index int64) bool) (ps []Prompt, bad []*RowError, asked map[int64]string) {
	t.Helper()
	opts.OnSkip = func(e *RowError) { bad = append(bad, e) }
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	asked = map[int64]string{}
	r.SetSkip(func(id string, index int64, byIndex bool) bool {
		if _, dup := asked[index]; dup {
			t.Errorf("row %d asked about twice", index)
		}
		asked[index] = strings.Clone(id) // id shares the reader's buffer (SkipFunc)
		if byIndex != (id == fmt.Sprint(index)) && byIndex {
			t.Errorf("row %d: byIndex with id %q", index, id)
		}
		return fn(id, index)
	})
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
	return ps, bad, asked
}

// The id a row is asked about before decoding is the id the decoder gives
// it, for every way an id is written; rows the quick scan cannot read are
// decoded as before; passing rows over changes no id and no bad-row count.
func TestSkipAsksWithTheDecodersID(t *testing.T) {
	lines := []string{
		`{"uid":"a","prompt":"p0"}`,
		`{"prompt":"p1 {[\"}]","uid":"b"}`,
		`{"uid":"c\"q\\u00e9","prompt":"p2"}`,
		`{"uid":"é ü","prompt":"p3"}`,
		`{"uid":12,"prompt":"p4"}`,
		`{"uid":1.5e3,"prompt":"p5"}`,
		`{"uid":-7,"prompt":"p6"}`,
		`{"uid":null,"prompt":"p7"}`,
		`{"prompt":"p8"}`,
		`{"uid":"","prompt":"p9"}`,
		`{"uid":{"x":1},"prompt":"p10"}`,
		`{"uid":"first","prompt":"p11","uid":"last"}`,
		`{"uid":"d","prompt":"p12","nested":{"a":[1,{"b":"}"}]}}`,
		`{"uid":"e","prompt":`,
		`not json`,
		``,
		` { "uid" : "f" , "prompt" : "p15" } `,
		`{"u\u0069d":"g","prompt":"p16"}`,
		`{"custom_id":"req-1","body":{"messages":[{"role":"user","content":"hi"}]}}`,
		`{"custom_id":"req-2","body":null,"prompt":"p18"}`,
		`{"custom_id":7,"body":{"messages":[{"role":"user","content":"hi"}]}}`,
	}
	dir := t.TempDir()
	path := writeFile(t, dir, "d.jsonl", strings.Join(lines, "\n")+"\n")
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"id_field", Options{Selection: Selection{Path: path, IDField: "uid", Format: FormatAuto}}},
		{"auto", Options{Selection: Selection{Path: path}}},
		{"prompt shape", Options{Selection: Selection{Path: path, Format: FormatPrompt, PromptField: "prompt"}}},
		{"openai-batch", Options{Selection: Selection{Path: path, Format: FormatOpenAIBatch}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantBad := readAll(t, tc.opts)
			byIndex := map[int64]string{}
			for _, p := range want {
				byIndex[p.Index] = p.ID
			}
			// Asked about every row, skipping none: the same prompts.
			got, gotBad, asked := readSkipping(t, tc.opts, func(string, int64) bool { return false })
			if !reflect.DeepEqual(got, want) || len(gotBad) != len(wantBad) {
				t.Fatalf("with a skip that passes nothing over: %d prompts, %d bad; want %d, %d", len(got), len(gotBad), len(want), len(wantBad))
			}
			for i, id := range asked {
				if w, ok := byIndex[i]; ok && w != id {
					t.Errorf("row %d asked with id %q, decoded id %q", i, id, w)
				}
			}
			// Passing over the good rows of even index leaves the others.
			got, gotBad, _ = readSkipping(t, tc.opts, func(id string, i int64) bool {
				_, good := byIndex[i]
				return good && i%2 == 0
			})
			var rest []Prompt
			for _, p := range want {
				if _, wasAsked := asked[p.Index]; !wasAsked || p.Index%2 == 1 {
					rest = append(rest, p)
				}
			}
			if !reflect.DeepEqual(ids(got), ids(rest)) || len(gotBad) != len(wantBad) {
				t.Errorf("passing even rows over: ids %v, %d bad; want %v, %d", ids(got), len(gotBad), ids(rest), len(wantBad))
			}
			if tc.name == "prompt shape" && len(asked) != len(lines)-1 {
				// Row-index ids: every row is asked about, a bad one too.
				t.Errorf("asked about %d rows, want %d", len(asked), len(lines)-1)
			}
		})
	}
}

// A Parquet dataset with row-index ids passes rows over without reading
// them and reads the right rows after each run of skipped ones, across row
// groups and together with another shard's rows.
func TestSkipParquetRows(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Prompt string `parquet:"prompt"`
	}
	w := parquet.NewGenericWriter[row](f, parquet.MaxRowsPerRowGroup(7))
	for i := range 60 {
		if _, err := w.Write([]row{{Prompt: fmt.Sprint("q", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, shard := range []Shard{{}, {Index: 1, Count: 2}} {
		opts := Options{Selection: Selection{Path: filepath.Join(dir, "a.parquet"), Format: FormatPrompt, PromptField: "prompt", Shard: shard}}
		// Skip rows 0-19 and every row of index 3 mod 5.
		got, _, _ := readSkipping(t, opts, func(_ string, i int64) bool { return i < 20 || i%5 == 3 })
		var want []string
		for i := 20; i < 60; i++ {
			if i%5 != 3 && (shard.Count == 0 || i%shard.Count == shard.Index) {
				want = append(want, fmt.Sprint(i))
			}
		}
		if !reflect.DeepEqual(ids(got), want) {
			t.Fatalf("shard %+v: ids %v, want %v", shard, ids(got), want)
		}
		for _, p := range got {
			if c := p.Messages[0].Content; c != "q"+p.ID {
				t.Errorf("row %s reads %q", p.ID, c)
			}
		}
	}
}

// FuzzIDScan: whenever the quick scan reads an id from a line that the
// decoder reads as a row with that field, the two ids agree.
func FuzzIDScan(f *testing.F) {
	for _, s := range []string{
		`{"uid":"a","prompt":"p"}`, `{"uid":12}`, `{"uid":1.5e3}`, `{"uid":"\u00e9\"x"}`,
		`{"uid":"a","uid":"b"}`, `{"x":{"uid":"in"},"uid":"out"}`, `{"uid":-0}`, `{"uid":1e400}`,
		`{"uid":"a"} x`, `[{"uid":"a"}]`, `{"uid" : "é" }`, `{"a":"}","uid":"q"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		vals := make([][]byte, 1)
		if !rawjson.Fields(line, []string{"uid"}, vals) {
			return
		}
		id, ok := rawjson.ID(vals[0])
		if !ok {
			return
		}
		var rd bytes.Reader
		r, bad := decodeObject(&rd, line)
		if bad != nil {
			return // a bad row whose id the scan read: decoded, it is reported (see SetSkip)
		}
		want, fe := shape.ID(r, "uid")
		if fe != nil {
			t.Fatalf("%q: scan read id %q, the decoder finds none: %v", line, id, fe.Err)
		}
		if id != want {
			t.Fatalf("%q: scan read id %q, the decoder %q", line, id, want)
		}
	})
}

// A Parquet dataset with an id column reads that column alone for the
// skip, in step with the rows across pages and row groups: the ids asked
// are the decoder's (strings, nulls, integers), and rows passed over are
// not read.
func TestSkipParquetIDColumn(t *testing.T) {
	dir := t.TempDir()
	type strRow struct {
		UID    *string `parquet:"uid,optional"`
		Prompt string  `parquet:"prompt"`
	}
	type intRow struct {
		UID    int64  `parquet:"uid"`
		Prompt string `parquet:"prompt"`
	}
	write := func(name string, rows any) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		opts := []parquet.WriterOption{parquet.MaxRowsPerRowGroup(7), parquet.PageBufferSize(64)}
		switch rs := rows.(type) {
		case []strRow:
			w := parquet.NewGenericWriter[strRow](f, opts...)
			if _, err := w.Write(rs); err != nil {
				t.Fatal(err)
			}
			err = w.Close()
		case []intRow:
			w := parquet.NewGenericWriter[intRow](f, opts...)
			if _, err := w.Write(rs); err != nil {
				t.Fatal(err)
			}
			err = w.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		return path
	}
	var strs []strRow
	var ints []intRow
	for i := range 50 {
		id := fmt.Sprintf("q-%d-é", i*13)
		var p *string
		if i%9 != 4 {
			p = &id
		}
		strs = append(strs, strRow{UID: p, Prompt: fmt.Sprint("p", i)})
		ints = append(ints, intRow{UID: int64(i*1000) - 7000, Prompt: fmt.Sprint("p", i)})
	}
	for _, path := range []string{write("s.parquet", strs), write("i.parquet", ints)} {
		for _, shard := range []Shard{{}, {Index: 1, Count: 3}} {
			opts := Options{Selection: Selection{Path: path, Format: FormatPrompt, PromptField: "prompt", IDField: "uid", Shard: shard}}
			want, wantBad := readAll(t, opts)
			byIndex := map[int64]string{}
			for _, p := range want {
				byIndex[p.Index] = p.ID
			}
			got, _, asked := readSkipping(t, opts, func(string, int64) bool { return false })
			if !reflect.DeepEqual(ids(got), ids(want)) {
				t.Fatalf("%s %+v: with a skip that passes nothing over: %v, want %v", path, shard, ids(got), ids(want))
			}
			if len(asked) != len(want) {
				t.Errorf("%s %+v: asked about %d rows, want every good one (%d)", path, shard, len(asked), len(want))
			}
			for i, id := range asked {
				if byIndex[i] != id {
					t.Errorf("%s: row %d asked with id %q, decoded id %q", path, i, id, byIndex[i])
				}
			}
			got, gotBad, _ := readSkipping(t, opts, func(_ string, i int64) bool { return i%2 == 0 })
			var rest []string
			for _, p := range want {
				if p.Index%2 == 1 {
					rest = append(rest, p.ID)
				}
			}
			if !reflect.DeepEqual(ids(got), rest) || len(gotBad) != len(wantBad) {
				t.Errorf("%s %+v: passing even rows over: %v, %d bad; want %v, %d", path, shard, ids(got), len(gotBad), rest, len(wantBad))
			}
			for _, p := range got {
				if c := p.Messages[0].Content; c != fmt.Sprint("p", p.Index) {
					t.Errorf("row %d reads %q", p.Index, c)
				}
			}
		}
	}
}
