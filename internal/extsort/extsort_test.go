package extsort

import (
	"cmp"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// item is a key and the order it was added in, to check that the sort is
// stable.
type item struct {
	key string
	seq int
}

var codec = Codec[item]{
	Cmp:  func(a, b item) int { return cmp.Compare(a.key, b.key) },
	Size: func(v item) int { return 24 + len(v.key) + 8 },
	Append: func(buf []byte, v item) []byte {
		buf = binary.AppendUvarint(buf, uint64(v.seq))
		return append(buf, v.key...)
	},
	Decode: func(b []byte) (item, error) {
		seq, n := binary.Uvarint(b)
		if n <= 0 {
			return item{}, errors.New("bad seq")
		}
		return item{key: string(b[n:]), seq: int(seq)}, nil
	},
}

func collect(t *testing.T, it *Iter[item]) []item {
	t.Helper()
	var out []item
	for {
		v, ok := it.Next()
		if !ok {
			break
		}
		out = append(out, v)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSortMatchesStableSort: random keys with repeats, through budgets that
// keep them in memory, spill a few runs, and spill more runs than one merge
// takes (so runs are merged into runs first): the output is the stable sort
// of the input, and nothing is left in the directory.
func TestSortMatchesStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var in []item
	for i := range 20000 {
		in = append(in, item{key: strconv.Itoa(r.IntN(5000)), seq: i})
	}
	want := slices.Clone(in)
	slices.SortStableFunc(want, codec.Cmp)
	for _, budget := range []int{1 << 30, 200_000, 2_000} {
		t.Run(strconv.Itoa(budget), func(t *testing.T) {
			dir := t.TempDir()
			s := New(codec, Options{Dir: dir, Budget: budget})
			for _, v := range in {
				if err := s.Add(v); err != nil {
					t.Fatal(err)
				}
			}
			spilled := s.Runs()
			switch {
			case budget == 1<<30 && spilled != 0:
				t.Errorf("everything fits, yet %d runs were spilled", spilled)
			case budget == 2_000 && spilled <= fanIn:
				t.Errorf("budget %d: %d runs, want more than %d to exercise the merge of runs", budget, spilled, fanIn)
			}
			it, err := s.Sorted()
			if err != nil {
				t.Fatal(err)
			}
			got := collect(t, it)
			if !slices.Equal(got, want) {
				t.Fatalf("budget %d (%d runs): the output is not the stable sort of the input", budget, spilled)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left in the directory: %v", ents)
			}
		})
	}
}

// TestSortedInputIsOneRun: items added in order extend one run whatever
// the budget, and a frozen Sorter reads back the same items every time.
func TestSortedInputIsOneRun(t *testing.T) {
	s := New(codec, Options{Dir: t.TempDir(), Budget: 1000})
	defer s.Close()
	var want []item
	for i := range 5000 {
		v := item{key: strconv.Itoa(100000 + i), seq: i}
		want = append(want, v)
		if err := s.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Freeze(); err != nil {
		t.Fatal(err)
	}
	if s.Runs() != 1 {
		t.Errorf("%d runs for input in order, want 1", s.Runs())
	}
	for range 2 {
		it, err := s.Sorted()
		if err != nil {
			t.Fatal(err)
		}
		if got := collect(t, it); !slices.Equal(got, want) {
			t.Fatal("a frozen sorter read back other items")
		}
	}
}

// TestMergeOfSorters: two frozen sorters merged yield every item of both in
// order, the first sorter's before the second's among equals.
func TestMergeOfSorters(t *testing.T) {
	a := New(codec, Options{Dir: t.TempDir(), Budget: 500})
	b := New(codec, Options{Dir: t.TempDir(), Budget: 500})
	defer a.Close()
	defer b.Close()
	var want []item
	for i := range 3000 {
		v := item{key: strconv.Itoa(i % 700), seq: i}
		s := a
		if i%3 == 0 {
			s = b
		}
		if err := s.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*Sorter[item]{a, b} {
		if err := s.Freeze(); err != nil {
			t.Fatal(err)
		}
		it, _ := s.Sorted()
		want = append(want, collect(t, it)...)
	}
	slices.SortStableFunc(want, codec.Cmp)
	ia, _ := a.Sorted()
	ib, _ := b.Sorted()
	if got := collect(t, Merge(codec.Cmp, ia, ib)); !slices.Equal(got, want) {
		t.Fatal("the merge of two sorters is not their items in order")
	}
}

// TestCorruptRunIsAnError: a run that does not decode ends the iteration
// with an error naming the file, not a short stream.
func TestCorruptRunIsAnError(t *testing.T) {
	bad := codec
	bad.Decode = func([]byte) (item, error) { return item{}, errors.New("boom") }
	s := New(bad, Options{Dir: t.TempDir(), Budget: 10})
	defer s.Close()
	for i := range 10 {
		_ = s.Add(item{key: strconv.Itoa(i)})
	}
	it, err := s.Sorted()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := it.Next(); ok || it.Err() == nil {
		t.Fatalf("a run that does not decode read as ok (err %v)", it.Err())
	}
}
