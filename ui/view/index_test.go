package view

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

func built(t testing.TB, dirs ...string) *Index {
	t.Helper()
	ix := NewIndex(dirs)
	t.Cleanup(ix.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ix.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return ix
}

// checkAgainstAudit: the index's figures are the audit's (what inspect
// prints), and every record the index holds reads back, in part order, as
// the records written.
func checkAgainstAudit(t *testing.T, ix *Index, dir string, want []sink.Record) {
	t.Helper()
	a, err := audit.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := ix.Dist(2048)
	// The completion histogram's axis runs to the longest answer, not to
	// max_tokens (issue 41): its bins cover the data and no more, however
	// far above it max_tokens is.
	if h := ix.Dist(1 << 20).Completion; h.N > 0 && (h.Width*histBins < h.Max || h.Width*(histBins-1) > max(h.Max, histBins)) {
		t.Errorf("completion histogram: %d bins of %v for a longest answer of %v (max_tokens 1048576)", histBins, h.Width, h.Max)
	}
	finish := map[string]int64{}
	for _, c := range d.Finish {
		if !strings.HasPrefix(c.Name, "error: ") {
			finish[c.Name] = c.Count
		}
	}
	if d.Records != a.Records || int(d.Failed) != a.Errors.Open || !maps.Equal(finish, a.FinishReasons) ||
		d.Truncated != a.FinishReasons["length"] || d.NoReasoning != a.EmptyReasoning || d.ThinkTags != a.ThinkTags ||
		d.PromptTokens != a.PromptTokens || d.CompletionTokens != a.CompletionTokens {
		t.Errorf("index: records %d failed %d finish %v truncated %d no reasoning %d think tags %d tokens %d/%d\n"+
			"audit: records %d failed %d finish %v no reasoning %d think tags %d tokens %d/%d",
			d.Records, d.Failed, finish, d.Truncated, d.NoReasoning, d.ThinkTags, d.PromptTokens, d.CompletionTokens,
			a.Records, a.Errors.Open, a.FinishReasons, a.EmptyReasoning, a.ThinkTags, a.PromptTokens, a.CompletionTokens)
	}
	rows, err := ix.Rows(ix.Select(AnyQuery))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		got, _ := json.Marshal(r.Record)
		exp, _ := json.Marshal(want[i])
		if !bytes.Equal(got, exp) {
			t.Fatalf("row %d:\n%s\nwant\n%s", i, got, exp)
		}
	}
}

// TestViewIndexAgreesWithTheAudit: for both formats, the index counts what
// inspect counts, reads every record back by its location, and changes
// nothing in the directory.
func TestViewIndexAgreesWithTheAudit(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			f, _ := writeFixture(t, t.TempDir(), format, 137, 20, false)
			before := dirState(t, f.dir)
			ix := built(t, f.dir)
			checkAgainstAudit(t, ix, f.dir, f.records)
			if d := ix.Dist(2048); d.ErrHistory != int64(len(f.answered)) || d.Failed != int64(len(f.failed)) {
				t.Errorf("answered after errors %d (want %d), failed %d (want %d)", d.ErrHistory, len(f.answered), d.Failed, len(f.failed))
			}
			if p := ix.Progress(); !p.Ready || p.Records != 137 || p.BytesRead != p.Bytes {
				t.Errorf("progress at the end: %+v", p)
			}
			if after := dirState(t, f.dir); !maps.Equal(before, after) {
				t.Errorf("the view changed the directory:\n%v\n%v", before, after)
			}
		})
	}
}

func keysOf(rows []Row) []sink.Key {
	out := make([]sink.Key, len(rows))
	for i, r := range rows {
		out[i] = sink.Key{ID: r.ID(), Sample: r.Sample()}
	}
	return out
}

// TestViewFilters: each filter of the table selects exactly the records
// it names, in part order; together they intersect.
func TestViewFilters(t *testing.T) {
	f, _ := writeFixture(t, t.TempDir(), sink.FormatJSONL, 137, 20, false)
	ix := built(t, f.dir)
	pick := func(ok func(r sink.Record) bool) []sink.Key {
		var out []sink.Key
		for _, r := range f.records {
			if ok(r) {
				out = append(out, r.Key())
			}
		}
		return out
	}
	q := func(set func(q *Query)) Query {
		q := AnyQuery
		set(&q)
		return q
	}
	answered := func(k sink.Key) bool { return slices.Contains(f.answered, k) }
	cases := []struct {
		name string
		q    Query
		want []sink.Key
	}{
		{"truncated", q(func(q *Query) { q.Truncated = true }), pick(func(r sink.Record) bool { return r.FinishReason == "length" })},
		{"empty reasoning", q(func(q *Query) { q.NoReasoning = true }), pick(func(r sink.Record) bool { return r.Reasoning == "" })},
		{"think tags", q(func(q *Query) { q.ThinkTags = true }), pick(func(r sink.Record) bool { return sink.ThinkTags(r.Content) })},
		// The keys that failed for good first (the index reads DIR/errors
		// before the parts), then the records answered after failing.
		{"errors", q(func(q *Query) { q.Errors = true }), append(slices.Clone(f.failed), pick(func(r sink.Record) bool { return answered(r.Key()) })...)},
		{"tokens 500..1000", q(func(q *Query) { q.MinTokens, q.MaxTokens = 500, 1000 }),
			pick(func(r sink.Record) bool { return r.CompletionTokens >= 500 && r.CompletionTokens <= 1000 })},
		// A record exactly at a bound is inside it: the cut ones hold
		// max_tokens itself.
		{"tokens 2000..2048", q(func(q *Query) { q.MinTokens, q.MaxTokens = 2000, 2048 }),
			pick(func(r sink.Record) bool { return r.CompletionTokens >= 2000 && r.CompletionTokens <= 2048 })},
		{"tokens exactly 507", q(func(q *Query) { q.MinTokens, q.MaxTokens = 507, 507 }),
			pick(func(r sink.Record) bool { return r.CompletionTokens == 507 })},
		{"finish stop", q(func(q *Query) { q.Finish = "stop" }), pick(func(r sink.Record) bool { return r.FinishReason == "stop" })},
		{"truncated with think tags", q(func(q *Query) { q.Truncated, q.ThinkTags = true, true }),
			pick(func(r sink.Record) bool { return r.FinishReason == "length" && sink.ThinkTags(r.Content) })},
	}
	for _, c := range cases {
		rows, err := ix.Rows(ix.Select(c.q))
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(rows); !slices.Equal(got, c.want) || len(c.want) == 0 {
			t.Errorf("%s: %d keys %v\nwant %d %v", c.name, len(got), got, len(c.want), c.want)
		}
	}
}

// TestViewSorts: each order of the table sorts by its field, ties in part
// order, both ways, and keeps every record.
func TestViewSorts(t *testing.T) {
	f, _ := writeFixture(t, t.TempDir(), sink.FormatParquet, 137, 20, false)
	ix := built(t, f.dir)
	field := map[string]func(r Row) float64{
		"completion_tokens": func(r Row) float64 { return float64(r.Compl) },
		"prompt_tokens":     func(r Row) float64 { return float64(r.Prompt) },
		"reasoning_chars":   func(r Row) float64 { return float64(r.RLen) },
		"content_chars":     func(r Row) float64 { return float64(r.CLen) },
		"latency":           func(r Row) float64 { return float64(r.Latency) },
		"ttft":              func(r Row) float64 { return float64(r.TTFT) },
	}
	for _, by := range Sorts[1:] {
		for _, desc := range []bool{false, true} {
			q := AnyQuery
			q.Sort, q.Desc = by, desc
			rows, err := ix.Rows(ix.Select(q))
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(f.records) {
				t.Fatalf("%s: %d rows", by, len(rows))
			}
			if !slices.IsSortedFunc(rows, func(a, b Row) int {
				c := cmp.Compare(field[by](a), field[by](b))
				if desc {
					c = -c
				}
				return cmp.Or(c, cmp.Compare(a.Pos, b.Pos))
			}) {
				t.Errorf("sort %s desc=%v: not sorted", by, desc)
			}
		}
	}
	// The lengths are characters of every turn.
	for _, r := range f.records {
		pos, err := ix.Find(-1, r.Key())
		if err != nil || pos < 0 {
			t.Fatalf("Find(%v) = %d, %v", r.Key(), pos, err)
		}
		rows, _ := ix.Rows([]int32{pos})
		want := len([]rune(r.Content))
		if len(r.Turns) > 0 {
			want = 0
			for _, tr := range r.Turns {
				want += len([]rune(tr.Content))
			}
		}
		if rows[0].CLen != want {
			t.Errorf("%s: content %d characters, want %d", r.ID, rows[0].CLen, want)
		}
	}
}

// TestViewSearch: a search finds, ignoring case, the records whose content
// or reasoning holds the words, up to its cap, in part order; the hostile
// record's markup is found as text.
func TestViewSearch(t *testing.T) {
	f, _ := writeFixture(t, t.TempDir(), sink.FormatJSONL, 137, 20, false)
	ix := built(t, f.dir)
	find := func(text string, limit int) []sink.Key {
		q := AnyQuery
		q.Text = text
		var out []sink.Key
		read, err := ix.Search(context.Background(), q, limit, func(m Match) error {
			out = append(out, m.Record.Key())
			if indexFold(m.Snippet, text) < 0 {
				t.Errorf("snippet %q does not hold %q", m.Snippet, text)
			}
			return nil
		}, nil)
		if err != nil || read == 0 {
			t.Fatalf("search %q: %d read, %v", text, read, err)
		}
		return out
	}
	var want []sink.Key
	for _, r := range f.records {
		if strings.Contains(strings.ToLower(r.Content+"\x00"+r.Reasoning), "long long long") {
			want = append(want, r.Key())
		}
	}
	if got := find("LONG Long long", 1000); !slices.Equal(got, want) || len(want) < 10 {
		t.Errorf("search: %v\nwant %v", got, want)
	}
	if got := find("long long long", 5); !slices.Equal(got, want[:5]) {
		t.Errorf("search capped at 5: %v", got)
	}
	if got := find("<script>alert(1)", 10); !slices.Equal(got, []sink.Key{{ID: hostileID}}) {
		t.Errorf("search for the hostile markup: %v", got)
	}
	if got := find("first THOUGHT", 1000); len(got) == 0 {
		t.Errorf("a turn's reasoning is not searched")
	}
}

// TestViewLiveRun: while a run writes the directory, a refresh reads what
// it added (the part being filled grew, a part was finalized: a JSONL part
// renamed, a Parquet journal converted), and the index still agrees with
// the audit: no record twice, none lost, each readable where it now is.
func TestViewLiveRun(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			f, s := writeFixture(t, t.TempDir(), format, 45, 20, true)
			defer func() {
				if s != nil {
					_ = s.Close()
				}
			}()
			ix := built(t, f.dir)
			checkAgainstAudit(t, ix, f.dir, f.records)
			next := 1000
			for _, n := range []int{7, 30} {
				for range n {
					r := fixtureRecord(next)
					next++
					if err := s.Write(&r); err != nil {
						t.Fatal(err)
					}
					f.records = append(f.records, r)
				}
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := ix.Refresh(0); err != nil {
					t.Fatal(err)
				}
				checkAgainstAudit(t, ix, f.dir, f.records)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = nil
			if err := ix.Refresh(0); err != nil {
				t.Fatal(err)
			}
			checkAgainstAudit(t, ix, f.dir, f.records)
		})
	}
}

// TestViewSeveralDirectories: the shards of one job read as one set of
// records; a directory's filter keeps to its own, and a key is found in
// the directory named.
func TestViewSeveralDirectories(t *testing.T) {
	a, _ := writeFixture(t, t.TempDir(), sink.FormatJSONL, 30, 20, false)
	b, _ := writeFixture(t, t.TempDir(), sink.FormatParquet, 45, 20, false)
	ix := built(t, a.dir, b.dir)
	if d := ix.Dist(2048); d.Records != 75 {
		t.Errorf("%d records, want 30 + 45", d.Records)
	}
	for dir, want := range map[int]int{0: 30, 1: 45} {
		q := AnyQuery
		q.Dir = dir
		rows, err := ix.Rows(ix.Select(q))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != want {
			t.Errorf("directory %d: %d rows, want %d", dir, len(rows), want)
		}
		for _, r := range rows {
			if r.Dir != dir {
				t.Errorf("directory %d's filter shows a row of %d", dir, r.Dir)
			}
		}
	}
	k := sink.Key{ID: "40"} // only the second holds it
	if pos, err := ix.Find(0, k); err != nil || pos >= 0 {
		t.Errorf("Find in the first directory: %d, %v", pos, err)
	}
	if pos, err := ix.Find(1, k); err != nil || pos < 0 {
		t.Errorf("Find in the second directory: %d, %v", pos, err)
	}
}
