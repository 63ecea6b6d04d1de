package plan

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

// fakeHoldings is an output directory's holdings as a plan sees them.
type fakeHoldings struct {
	has, failed map[sink.Key]bool
}

func holdings(has, failed []sink.Key) fakeHoldings {
	h := fakeHoldings{has: map[sink.Key]bool{}, failed: map[sink.Key]bool{}}
	for _, k := range has {
		h.has[k] = true
	}
	for _, k := range failed {
		h.failed[k] = true
	}
	return h
}

// EachKey is as *audit.Audit gives them: the keys held, in key order.
func (h fakeHoldings) EachKey(yield func(sink.Key) bool) error {
	keys := slices.SortedFunc(maps.Keys(h.has), sink.CompareKeys)
	for _, k := range keys {
		if !yield(k) {
			break
		}
	}
	return nil
}

// Failed is as *audit.Audit says it: failed for good and no record.
func (h fakeHoldings) Failed(k sink.Key) bool { return h.failed[k] && !h.has[k] }

func (h fakeHoldings) distinct() int64 { return int64(len(h.has)) }

func union(hs ...fakeHoldings) fakeHoldings {
	u := holdings(nil, nil)
	for _, h := range hs {
		for k := range h.has {
			u.has[k] = true
		}
		for k := range h.failed {
			u.failed[k] = true
		}
	}
	return u
}

func key(id, sample int) sink.Key { return sink.Key{ID: fmt.Sprint(id), Sample: sample} }

// writeRows writes a prompt-format JSONL dataset of n rows.
func writeRows(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"prompt":"q%d"}`+"\n", i)
	}
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func shardJob(path string, index, count int, limit int64) job.Job {
	return job.Job{
		Selection: dataset.Selection{Path: path, Format: dataset.FormatPrompt, Limit: limit, Shard: dataset.Shard{Index: index, Count: count}},
		Sampling:  job.Sampling{Model: "m", Samples: 2},
	}
}

type counts struct{ selected, done, failed, pending, outside int64 }

func got(p *Plan) counts {
	return counts{p.Selected, p.Done, p.Failed, p.Pending, p.Outside}
}

// TestPlannerShardsAndUnion: the two shards of one dataset, run into two
// directories, and their union count what each directory holds, misses
// and lost for good, as inspect shows and a run would ask.
func TestPlannerShardsAndUnion(t *testing.T) {
	path := writeRows(t, 7) // shard 0/2: rows 0 2 4 6; shard 1/2: rows 1 3 5; 2 samples each
	dir0 := holdings(
		[]sink.Key{key(0, 0), key(0, 1), key(2, 0), key(1, 0)}, // 1/0 belongs to the other shard: outside
		[]sink.Key{key(4, 0)},
	)
	dir1 := holdings(
		[]sink.Key{key(1, 0), key(1, 1), key(5, 0)},
		[]sink.Key{key(3, 1), key(5, 0)}, // 5/0 failed once, then a record superseded it
	)
	j0, j1 := shardJob(path, 0, 2, 0), shardJob(path, 1, 2, 0)
	both := union(dir0, dir1)

	var pl Planner
	p0 := pl.Add(j0, dir0, dir0.distinct())
	p1 := pl.Add(j1, dir1, dir1.distinct())
	pu := pl.AddUnion([]job.Job{j0, j1}, both, both.distinct())
	// Limits in one dataset's pass: each plan keeps its own, the pass reads
	// up to the largest, whatever the order they were added in.
	p0lim := pl.Add(shardJob(path, 0, 2, 3), dir0, dir0.distinct())
	pWhole := pl.Add(shardJob(path, 0, 1, 0), both, both.distinct())
	p1lim := pl.Add(shardJob(path, 1, 2, 5), dir1, dir1.distinct())
	pl.Count("")

	cases := []struct {
		name  string
		plan  *Plan
		shard string
		want  counts
	}{
		{"shard 0/2", p0, "0/2", counts{selected: 8, done: 3, failed: 1, pending: 4, outside: 1}},
		{"shard 1/2", p1, "1/2", counts{selected: 6, done: 3, failed: 1, pending: 2, outside: 0}},
		{"union", pu, "", counts{selected: 14, done: 6, failed: 2, pending: 6, outside: 0}},
		{"shard 0/2 limit 3", p0lim, "0/2", counts{selected: 4, done: 3, failed: 0, pending: 1, outside: 1}},
		{"whole", pWhole, "", counts{selected: 14, done: 6, failed: 2, pending: 6, outside: 0}},
		{"shard 1/2 limit 5", p1lim, "1/2", counts{selected: 4, done: 2, failed: 1, pending: 1, outside: 1}},
	}
	for _, c := range cases {
		if c.plan.Unreadable != "" {
			t.Errorf("%s: unreadable: %s", c.name, c.plan.Unreadable)
			continue
		}
		if g := got(c.plan); g != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, g, c.want)
		}
		if c.plan.Selected != c.plan.Done+c.plan.Failed+c.plan.Pending {
			t.Errorf("%s: selected %d != done+failed+pending", c.name, c.plan.Selected)
		}
		if c.plan.Shard != c.shard || c.plan.Path != path || c.plan.Samples != 2 {
			t.Errorf("%s: shard %q path %q samples %d, want %q %q 2", c.name, c.plan.Shard, c.plan.Path, c.plan.Samples, c.shard, path)
		}
	}
	// The shards' plans add up to the union's: nothing asked twice or lost.
	if p0.Selected+p1.Selected != pu.Selected || p0.Pending+p1.Pending != pu.Pending {
		t.Errorf("shards select %d+%d (pending %d+%d), union %d (pending %d)",
			p0.Selected, p1.Selected, p0.Pending, p1.Pending, pu.Selected, pu.Pending)
	}
}

// TestPlannerLimitOrder: one pass serves several limits whichever comes
// first; a limited plan never hides rows from an unlimited one.
func TestPlannerLimitOrder(t *testing.T) {
	path := writeRows(t, 10)
	none := holdings(nil, nil)
	for _, limits := range [][]int64{{3, 0}, {0, 3}, {3, 8}, {8, 3}, {2, 4, 0, 6}} {
		var pl Planner
		var plans []*Plan
		for _, l := range limits {
			plans = append(plans, pl.Add(shardJob(path, 0, 1, l), none, 0))
		}
		pl.Count("")
		for i, l := range limits {
			want := int64(10)
			if l > 0 {
				want = l
			}
			if plans[i].Selected != 2*want || plans[i].Pending != 2*want {
				t.Errorf("limits %v: plan with limit %d selects %d (pending %d), want %d", limits, l, plans[i].Selected, plans[i].Pending, 2*want)
			}
		}
	}
}

// TestPlannerUnreadable: a dataset that cannot be read from here leaves
// its plans Unreadable with the reason and no counts, and only those: the
// path override applies to every plan, one missing dataset does not spoil
// another.
func TestPlannerUnreadable(t *testing.T) {
	path := writeRows(t, 4)
	held := holdings([]sink.Key{key(0, 0)}, nil)
	missing := filepath.Join(t.TempDir(), "moved.jsonl")

	t.Run("override", func(t *testing.T) {
		var pl Planner
		plans := []*Plan{
			pl.Add(shardJob(path, 0, 2, 0), held, 1),
			pl.Add(shardJob(path, 1, 2, 0), held, 1),
			pl.AddUnion([]job.Job{shardJob(path, 0, 2, 0), shardJob(path, 1, 2, 0)}, held, 1),
		}
		pl.Count(missing)
		for i, p := range plans {
			if p.Unreadable == "" || !strings.Contains(p.Unreadable, missing) {
				t.Errorf("plan %d: Unreadable %q, want the error naming %s", i, p.Unreadable, missing)
			}
			if p.Path != missing {
				t.Errorf("plan %d: path %q, want the override %s", i, p.Path, missing)
			}
			if got(p) != (counts{}) {
				t.Errorf("plan %d: unreadable but counted %+v", i, got(p))
			}
		}
		if plans[0].Shard != "0/2" || plans[1].Shard != "1/2" || plans[0].Samples != 2 {
			t.Errorf("unreadable plans lost what they are: %+v, %+v", plans[0], plans[1])
		}
	})

	t.Run("one of two datasets", func(t *testing.T) {
		var pl Planner
		gone := shardJob(missing, 0, 1, 0)
		here := pl.Add(shardJob(path, 0, 1, 0), held, 1)
		lost := pl.Add(gone, held, 1)
		pl.Count("")
		if here.Unreadable != "" || here.Selected != 8 || here.Done != 1 {
			t.Errorf("readable dataset: %+v", here)
		}
		if !strings.Contains(lost.Unreadable, missing) {
			t.Errorf("missing dataset: Unreadable %q, want it to name %s", lost.Unreadable, missing)
		}
	})

	t.Run("no path", func(t *testing.T) {
		var pl Planner
		p := pl.Add(job.Job{Sampling: job.Sampling{Samples: 1}}, held, 1)
		pl.Count("")
		if p.Unreadable == "" {
			t.Errorf("a job without a dataset path: %+v, want Unreadable", p)
		}
	})
}

// TestPlannerDuplicateIDAcrossShards: with an id column, an id that
// appears in both shards is asked by both shards' runs (each reader sees
// only its own rows), so each shard's plan must count it; the union (one
// directory's worth of keys) counts it once.
func TestPlannerDuplicateIDAcrossShards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	rows := `{"uid":"a","prompt":"q0"}` + "\n" + `{"uid":"a","prompt":"q1"}` + "\n" +
		`{"uid":"b","prompt":"q2"}` + "\n" + `{"uid":"c","prompt":"q3"}` + "\n"
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	mkJob := func(index int) job.Job {
		j := shardJob(path, index, 2, 0)
		j.Selection.IDField = "uid"
		j.Sampling.Samples = 1
		return j
	}
	dir1 := holdings([]sink.Key{{ID: "a"}}, nil) // shard 1's run asked row 1, id a
	var pl Planner
	p1 := pl.Add(mkJob(1), dir1, dir1.distinct())
	pl.Count("")
	if p1.Unreadable != "" {
		t.Fatal(p1.Unreadable)
	}
	want := counts{selected: 2, done: 1, pending: 1}
	if g := got(p1); g != want {
		t.Errorf("shard 1/2 with a duplicate id from shard 0: %+v, want %+v (dup_ids %d)", g, want, p1.DupIDs)
	}
}

// TestPlannerIDsOutOfOrder: ids from a column come in any order, repeated
// far apart; the merge with the keys held then needs them sorted (a second
// pass, sorting on disk), and counts as a lookup of each key would: a
// repeat once, done, failed and pending keys by key.
func TestPlannerIDsOutOfOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	var b strings.Builder
	ids := []string{"m", "c", "x", "a", "c", "q", "b", "m", "z", "d"}
	for i, id := range ids {
		fmt.Fprintf(&b, `{"uid":%q,"prompt":"q%d"}`+"\n", id, i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	j := shardJob(path, 0, 1, 0)
	j.Selection.IDField = "uid"
	j.Sampling.Samples = 2
	held := holdings(
		[]sink.Key{{ID: "a"}, {ID: "a", Sample: 1}, {ID: "m", Sample: 1}, {ID: "z"}, {ID: "gone"}, {ID: "q", Sample: 5}},
		[]sink.Key{{ID: "x"}, {ID: "a"}})
	var pl Planner
	p := pl.Add(j, held, held.distinct())
	pl.Count("")
	if p.Unreadable != "" {
		t.Fatal(p.Unreadable)
	}
	// 8 distinct ids x 2 samples; done: a/0, a/1, m/1, z/0; failed: x/0
	// (a/0 failed too, but a record supersedes it).
	want := counts{selected: 16, done: 4, failed: 1, pending: 11, outside: 2}
	if g := got(p); g != want || p.DupIDs != 2 {
		t.Errorf("got %+v, dup_ids %d; want %+v, 2", g, p.DupIDs, want)
	}
}

// TestPlannerCountsBadRowsAsTheRunDoes (issue 21): a job of whole
// conversations reads every turn, so a row bad only past its first
// assistant turn is a bad row, not a key pending for ever; a repeated
// custom_id is a bad row too; and each shard counts the bad rows of its
// own rows, not the whole dataset's.
func TestPlannerCountsBadRowsAsTheRunDoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conv.jsonl")
	rows := []string{
		`{"messages":[{"role":"user","content":"q0"},{"role":"assistant","content":"a"}]}`,
		`{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a"},{"role":"user","content":""}]}`, // bad whole
		`{"messages":42}`, // bad either way
		`{"messages":[{"role":"user","content":"q3"},{"role":"assistant","content":"a"},{"role":"user","content":"q3b"},{"role":"assistant","content":"b"}]}`,
		`{"custom_id":"r","body":{"messages":[{"role":"user","content":"q4"}]}}`,
		`{"custom_id":"r","body":{"messages":[{"role":"user","content":"q5"}]}}`, // repeats r
	}
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk := func(turns job.Turns, index, count int) job.Job {
		return job.Job{
			Selection: dataset.Selection{Path: path, Format: dataset.FormatAuto, Shard: dataset.Shard{Index: index, Count: count}},
			Prompt:    job.Prompting{Turns: turns},
			Sampling:  job.Sampling{Model: "m", Samples: 1},
		}
	}
	held := holdings([]sink.Key{{ID: "0"}, {ID: "3"}, {ID: "r"}}, nil)
	var pl Planner
	whole := pl.Add(mk(job.TurnsAll, 0, 1), held, held.distinct())
	first := pl.Add(mk(job.TurnsFirst, 0, 1), held, held.distinct())
	odd := pl.Add(mk(job.TurnsAll, 1, 2), held, held.distinct()) // rows 1, 3, 5: r once
	pl.Count("")
	cases := []struct {
		name          string
		plan          *Plan
		want          counts
		bad, repeated int64
	}{
		{"turns all", whole, counts{selected: 3, done: 3}, 3, 1},
		{"turns first", first, counts{selected: 4, done: 3, pending: 1}, 2, 1},
		{"turns all, shard 1/2", odd, counts{selected: 2, done: 2, outside: 1}, 1, 0},
	}
	for _, c := range cases {
		if c.plan.Unreadable != "" {
			t.Fatalf("%s: %s", c.name, c.plan.Unreadable)
		}
		if g := got(c.plan); g != c.want || c.plan.BadRows != c.bad || c.plan.DupIDs != c.repeated {
			t.Errorf("%s: %+v, %d bad rows, %d repeating; want %+v, %d, %d", c.name, g, c.plan.BadRows, c.plan.DupIDs, c.want, c.bad, c.repeated)
		}
	}
}

// An audit of a directory is what a plan counts against.
var _ Holdings = (*audit.Audit)(nil)

// TestPlannerFindsARelativeDatasetByItsStamps: a job made in another
// directory names its dataset relative to there; from here the path names
// nothing, but the manifest's stamps hold the files' absolute paths, so the
// plan is counted, not unknown.
func TestPlannerFindsARelativeDatasetByItsStamps(t *testing.T) {
	t.Parallel()
	path := writeRows(t, 3)
	j := shardJob(path, 0, 1, 0)
	content, err := dataset.Stamp(dataset.Options{Selection: j.Selection})
	if err != nil {
		t.Fatal(err)
	}
	j.Selection.Path, j.Selection.Content = filepath.Base(path), content
	held := holdings([]sink.Key{key(0, 0), key(0, 1)}, nil)
	var pl Planner
	p := pl.Add(j, held, held.distinct())
	pl.Count("")
	if want := (counts{selected: 6, done: 2, pending: 4}); p.Unreadable != "" || got(p) != want {
		t.Errorf("plan: %+v (unreadable %q), want %+v", got(p), p.Unreadable, want)
	}
}
