package dataset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/chat"
)

// golden is one line of a testdata/*.golden.jsonl file, written by
// gen_parquet.mjs next to the Parquet file it describes.
type golden struct {
	Index    int64          `json:"index"`
	Bad      bool           `json:"bad"`
	ID       string         `json:"id"`
	Source   string         `json:"source"`
	Messages []chat.Message `json:"messages"`
}

func readGolden(t *testing.T, name string) []golden {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []golden
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParquetGoldens reads Parquet files DuckDB wrote (LIST of STRUCT, as the
// Hub and pyarrow write them) and checks every row against the prompt the
// generator computed for it: a reader that silently read empty lists, lost a
// turn or moved an id fails here.
func TestParquetGoldens(t *testing.T) {
	tests := []struct {
		file, golden string
		opts         Options
	}{
		{"sharegpt_snappy.parquet", "sharegpt.golden.jsonl", Options{}},
		{"sharegpt_zstd.parquet", "sharegpt.golden.jsonl", Options{}},
		{"sharegpt_zstd.parquet", "sharegpt.golden.jsonl", Options{Selection: Selection{Format: "sharegpt"}}},
		{"messages.parquet", "messages.golden.jsonl", Options{Selection: Selection{IDField: "uid"}, SourceField: "category"}},
		{"messages.parquet", "messages.golden.jsonl", Options{Selection: Selection{Format: "messages", IDField: "uid"}, SourceField: "category"}},
		{"prompt.parquet", "prompt.golden.jsonl", Options{}},
		{"prompt.parquet", "prompt.golden.jsonl", Options{Selection: Selection{Format: "prompt", PromptField: "prompt"}}},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.opts.Format, func(t *testing.T) {
			want := readGolden(t, tt.golden)
			path := filepath.Join("testdata", tt.file)
			opts := tt.opts
			opts.Path = path
			ps, skipped := readAll(t, opts)
			got := map[int64]Prompt{}
			for _, p := range ps {
				got[p.Index] = p
			}
			bad := map[int64]*RowError{}
			for _, e := range skipped {
				bad[e.Row] = e
			}
			for _, g := range want {
				if g.Bad {
					e, ok := bad[g.Index]
					if !ok {
						t.Errorf("row %d: want a bad row, got %+v", g.Index, got[g.Index])
					} else if e.File != path || e.FileRow != g.Index || e.Line != 0 {
						t.Errorf("row %d: RowError %+v does not locate the row", g.Index, e)
					}
					continue
				}
				p, ok := got[g.Index]
				if !ok {
					t.Errorf("row %d: missing (skipped: %v)", g.Index, bad[g.Index])
					continue
				}
				if p.ID != g.ID || p.Source != g.Source || !reflect.DeepEqual(p.Messages, g.Messages) {
					t.Errorf("row %d:\n got  id=%q source=%q %q\n want id=%q source=%q %q", g.Index, p.ID, p.Source, p.Messages, g.ID, g.Source, g.Messages)
				}
				if want := fmt.Sprintf("%s:row %d", path, g.Index); p.Location != want {
					t.Errorf("row %d: location %q, want %q", g.Index, p.Location, want)
				}
			}
			if len(ps)+len(skipped) != len(want) {
				t.Errorf("%d prompts + %d bad rows, golden has %d rows", len(ps), len(skipped), len(want))
			}
			if n, err := Count(Options{Selection: Selection{Path: path}}); err != nil || n != int64(len(want)) {
				t.Errorf("Count = %d, %v; want %d", n, err, len(want))
			}
		})
	}
}

// TestParquetBadRowMessage checks the text a person sees for a bad Parquet
// row: the file, the row within it and the field.
func TestParquetBadRowMessage(t *testing.T) {
	path := filepath.Join("testdata", "sharegpt_snappy.parquet")
	r, err := Open(Options{Selection: Selection{Path: path}, OnBadRow: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		if _, err = r.Next(); err != nil {
			break
		}
	}
	if want := path + ":row 7: conversations: no user turn before the first assistant turn"; err == nil || err.Error() != want {
		t.Errorf("Next = %v, want %q", err, want)
	}
}

type pqTurn struct {
	From  string `parquet:"from"`
	Value string `parquet:"value"`
}

type pqRow struct {
	Conversations []pqTurn `parquet:"conversations,list"`
	Source        *string  `parquet:"source,optional"`
}

// TestParquetRowGroupsAndGlob reads a file of many small row groups (DuckDB
// will not write groups this small) together with a JSONL file in one glob:
// ids run on across files and formats, and limit and shards cut the same rows
// in Parquet as in JSONL.
func TestParquetRowGroupsAndGlob(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[pqRow](f, parquet.MaxRowsPerRowGroup(7), parquet.Compression(&parquet.Zstd))
	var rows []pqRow
	for i := range 50 {
		var src *string
		if i%5 != 0 {
			s := fmt.Sprint("src", i%3)
			src = &s
		}
		rows = append(rows, pqRow{Conversations: []pqTurn{{"human", fmt.Sprint("q", i)}, {"gpt", "a"}}, Source: src})
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "b.jsonl", sharegptLine("src", "human", "q50", "gpt", "a")+"\n"+sharegptLine("src", "human", "q51", "gpt", "a"))
	glob := filepath.Join(dir, "*")

	ps, skipped := readAll(t, Options{Selection: Selection{Path: glob}})
	if len(ps) != 52 || len(skipped) != 0 {
		t.Fatalf("%d prompts, %d skipped; want 52, 0", len(ps), len(skipped))
	}
	for i, p := range ps {
		if p.ID != fmt.Sprint(i) || p.Messages[0].Content != fmt.Sprint("q", i) {
			t.Errorf("prompt %d: id %q content %q", i, p.ID, p.Messages[0].Content)
		}
		if i < 50 && i%5 == 0 && p.Source != "" {
			t.Errorf("row %d: null source read as %q", i, p.Source)
		}
	}

	for _, o := range []Options{{Selection: Selection{Limit: 20}}, {Selection: Selection{Shard: Shard{Index: 1, Count: 3}}}, {Selection: Selection{Limit: 51, Shard: Shard{Index: 2, Count: 4}}}} {
		o.Path = glob
		ps, _ := readAll(t, o)
		var want []string
		for i := range 52 {
			if (o.Limit == 0 || int64(i) < o.Limit) && (o.Shard.Count == 0 || i%o.Shard.Count == o.Shard.Index) {
				want = append(want, fmt.Sprint(i))
			}
		}
		if !reflect.DeepEqual(ids(ps), want) {
			t.Errorf("%+v: ids %v, want %v", o, ids(ps), want)
		}
		if n, err := Count(o); err != nil || n != int64(len(want)) {
			t.Errorf("%+v: Count = %d, %v; want %d", o, n, err, len(want))
		}
	}
}
