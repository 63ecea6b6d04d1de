package dataset

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset/stamp"
)

// TestSelectionContainsAgreesWithCountAndReader holds the three places that
// decide which rows a job asks to one rule: Count (the progress total and
// the plan), the Reader (what a run sends) and Contains (what resume and
// inspect count against) must name the same rows for every limit and shard.
func TestSelectionContainsAgreesWithCountAndReader(t *testing.T) {
	const rows = 11
	var b strings.Builder
	for i := range rows {
		b.WriteString(fmt.Sprintf(`{"prompt":"q%d"}`+"\n", i))
		if i == 4 {
			b.WriteString("\n   \n") // blank lines are not rows
		}
	}
	path := writeFile(t, t.TempDir(), "rows.jsonl", b.String())

	shards := []Shard{{}, {Index: 0, Count: 2}, {Index: 1, Count: 2}, {Index: 2, Count: 3}, {Index: 3, Count: 4}, {Index: 0, Count: 20}}
	limits := []int64{0, 1, 2, 5, 10, 11, 12, 100}
	for _, sh := range shards {
		for _, limit := range limits {
			sel := Selection{Path: path, Format: FormatPrompt, Limit: limit, Shard: sh}
			t.Run(fmt.Sprintf("shard=%s/limit=%d", shardName(sh), limit), func(t *testing.T) {
				var want []int64
				for i := range int64(rows + 5) { // past the end: Contains alone does not know the size
					if i < rows && sel.Contains(i) {
						want = append(want, i)
					}
				}
				n, err := Count(Options{Selection: sel})
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(len(want)) {
					t.Errorf("Count = %d, Contains selects %d rows %v", n, len(want), want)
				}
				ps, skipped := readAll(t, Options{Selection: sel})
				if len(skipped) != 0 {
					t.Fatalf("skipped %d rows of a clean file", len(skipped))
				}
				var got []int64
				for _, p := range ps {
					got = append(got, p.Index)
					if p.ID != fmt.Sprint(p.Index) {
						t.Errorf("row %d has id %q, want its index", p.Index, p.ID)
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Reader yields rows %v, Contains selects %v", got, want)
				}
			})
		}
	}
}

func shardName(s Shard) string {
	b, _ := s.MarshalText()
	return strings.ReplaceAll(string(b), "/", "of")
}

// TestShardsPartitionTheDataset: the shards of one count, run into
// separate directories, ask every row exactly once between them.
func TestShardsPartitionTheDataset(t *testing.T) {
	for _, count := range []int{2, 3, 7} {
		for _, limit := range []int64{0, 5, 13} {
			seen := map[int64]int{}
			var total int64
			for i := range count {
				sel := Selection{Limit: limit, Shard: Shard{Index: i, Count: count}}
				total += sel.Shard.of(rowsUnder(limit, 20))
				for idx := range int64(20) {
					if sel.Contains(idx) {
						seen[idx]++
					}
				}
			}
			want := rowsUnder(limit, 20)
			if int64(len(seen)) != want || total != want {
				t.Errorf("count=%d limit=%d: shards hold %d distinct rows (sum of of() %d), want %d", count, limit, len(seen), total, want)
			}
			for idx, n := range seen {
				if n != 1 {
					t.Errorf("count=%d limit=%d: row %d is in %d shards", count, limit, idx, n)
				}
			}
		}
	}
}

func rowsUnder(limit, n int64) int64 {
	if limit > 0 && limit < n {
		return limit
	}
	return n
}

func TestParseShard(t *testing.T) {
	good := []struct {
		in   string
		want Shard
	}{
		{"", Shard{}},
		{"0/1", Shard{}}, // one shard of one is the whole dataset
		{"3/4", Shard{Index: 3, Count: 4}},
		{"0/2", Shard{Index: 0, Count: 2}},
	}
	for _, c := range good {
		got, err := ParseShard(c.in)
		if err != nil {
			t.Errorf("ParseShard(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseShard(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
	for _, in := range []string{"4/4", "-1/2", "a/b", "1/0", "0/0", "1/1", "2", "1/2/3", "0/-2", " 0/2"} {
		got, err := ParseShard(in)
		if err == nil {
			t.Errorf("ParseShard(%q) = %+v, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseShard(%q): error %q does not name the input", in, err)
		}
	}
}

func TestShardText(t *testing.T) {
	cases := []struct {
		shard Shard
		text  string
	}{
		{Shard{}, "all"},
		{Shard{Count: 1}, "all"},
		{Shard{Index: 0, Count: 2}, "0/2"},
		{Shard{Index: 1, Count: 2}, "1/2"},
		{Shard{Index: 3, Count: 4}, "3/4"},
	}
	for _, c := range cases {
		b, err := c.shard.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.text {
			t.Errorf("%+v.MarshalText() = %q, want %q", c.shard, b, c.text)
		}
		var back Shard
		if err := back.UnmarshalText(b); err != nil {
			t.Errorf("UnmarshalText(%q): %v", b, err)
			continue
		}
		if back.Whole() != c.shard.Whole() || (!back.Whole() && back != c.shard) {
			t.Errorf("%q reads back as %+v, want %+v", b, back, c.shard)
		}
		if c.shard.Whole() && back != (Shard{}) {
			t.Errorf("%q reads back as %+v, want the zero Shard", b, back)
		}
	}
	var s Shard
	if err := s.UnmarshalText([]byte("4/4")); err == nil || !strings.Contains(err.Error(), `"4/4"`) {
		t.Errorf(`UnmarshalText("4/4") = %v, want an error naming it`, err)
	}
}

// TestSelectionJSONRoundTrip: the manifest stores the selection as JSON and
// run, resume and inspect read it back; what they read must be what was
// written.
func TestSelectionJSONRoundTrip(t *testing.T) {
	sels := []Selection{
		{},
		{Path: "rows.jsonl", Format: FormatAuto},
		{
			Path:        "data/*.jsonl.zst",
			Content:     stamp.Content{{Name: "a.jsonl.zst", Size: 10, XXH64: "00000000000000ff"}, {Name: "b.jsonl.zst", Size: 0, XXH64: "ef46db3751d8e999"}},
			Format:      FormatPrompt,
			PromptField: "question",
			IDField:     "uid",
			Limit:       1000,
			Shard:       Shard{Index: 2, Count: 3},
		},
		{Path: "hf://owner/name@main", Revision: "hf://owner/name@0123456789abcdef0123456789abcdef01234567", Shard: Shard{Index: 0, Count: 2}},
	}
	for _, sel := range sels {
		b, err := json.Marshal(sel)
		if err != nil {
			t.Fatal(err)
		}
		var back Selection
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if !reflect.DeepEqual(back, sel) {
			t.Errorf("%s reads back as %+v, want %+v", b, back, sel)
		}
	}
	b, _ := json.Marshal(Selection{})
	if !strings.Contains(string(b), `"shard":"all"`) {
		t.Errorf("whole dataset marshals as %s, want shard \"all\"", b)
	}
}
