package sink

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestIDOrderIsTotal: the id order is a total order over ids of every
// shape mixed (decimal, zero-padded, file:row, text with and without
// colons), so that sorted runs merged give what one sort gives: sorting
// two shuffles of one list gives one list, every pair compares
// antisymmetrically and only an id with itself compares equal, and the
// order is transitive over every triple.
func TestIDOrderIsTotal(t *testing.T) {
	ids := []string{"0", "7", "007", "9", "10", "100", "a", "a:", "a:5", "a:05", "a:10", "a:b", "a:b:3",
		"b.jsonl:2", "b.jsonl:10", "b.jsonl", "b.jsonl:x", "10a", "1a", "9a", ":3", ":", "x:1:2", "x:1"}
	for i, a := range ids {
		for j, b := range ids {
			c, d := compareIDs(a, b), compareIDs(b, a)
			if (c < 0) != (d > 0) || (c == 0) != (i == j) {
				t.Errorf("compareIDs(%q, %q) = %d, reversed %d", a, b, c, d)
			}
			for _, e := range ids {
				if c < 0 && compareIDs(b, e) < 0 && compareIDs(a, e) >= 0 {
					t.Errorf("not transitive: %q < %q < %q but not %q < %q", a, b, e, a, e)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	x, y := slices.Clone(ids), slices.Clone(ids)
	r.Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
	slices.SortFunc(x, compareIDs)
	slices.SortFunc(y, compareIDs)
	if !slices.Equal(x, y) {
		t.Errorf("two shuffles sort differently:\n%q\n%q", x, y)
	}
	// What the order is for: numbers, then files in path order with
	// their rows in row order.
	want := []string{"0", "007", "7", "9", "10", "100"}
	var files []string
	for _, f := range []string{"a.jsonl", "b.jsonl"} {
		for _, row := range []int{0, 2, 10, 11} {
			files = append(files, f+":"+strconv.Itoa(row))
		}
	}
	got := append(slices.Clone(files), want...)
	r.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	slices.SortFunc(got, compareIDs)
	if w := append(want, files...); !slices.Equal(got, w) {
		t.Errorf("order\n got %q\nwant %q", got, w)
	}
}
