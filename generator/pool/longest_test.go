package pool

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// hinted is a sliceSource of rows 0..n-1 (ids their indices) with the
// given length hints.
func hinted(hints ...int) *sliceSource {
	s := newSliceSource(numberedIDs(len(hints))...)
	for i, h := range hints {
		s.prompts[i].Hint = h
	}
	return s
}

// askedOrder is the order of the rows talker was asked, by id.
func askedOrder(c *talker) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, len(c.sent))
	for i, m := range c.sent {
		ids[i] = strings.TrimPrefix(m[len(m)-1].Content, "prompt ")
	}
	return strings.Join(ids, " ")
}

// With one request in flight the window is longestWindow rows: each start
// is the longest hint of those held (ties in dataset order), rows without
// a hint join the window once it holds one, and at the end it drains
// longest first. Off, or with ids of an id column, the rows go in dataset
// order.
func TestLongestFirstOrder(t *testing.T) {
	// 0 for a row without an answer; more rows than the window holds.
	hints := []int{1, 5, 3, 0, 9, 2, 2, 7, 4, 4, 8, 1, 6, 3, 5, 2, 9, 1, 7, 0, 3, 6, 2, 8}
	inOrder := make([]string, len(hints))
	for i := range hints {
		inOrder[i] = strconv.Itoa(i)
	}
	cases := []struct {
		name    string
		longest bool
		unique  bool
		want    string
	}{
		{"longest first", true, true, windowOrder(hints, longestWindow)},
		{"off", false, true, strings.Join(inOrder, " ")},
		{"ids of an id column", true, false, strings.Join(inOrder, " ")},
	}
	if first := strings.Fields(cases[0].want)[0]; first != "4" {
		t.Fatalf("the reference starts row %s first, want 4: the longest of the first %d", first, longestWindow)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			talk := &talker{}
			opts := testOptions(1)
			opts.UniqueIDs, opts.LongestFirst = c.unique, c.longest
			out := openSink(t, t.TempDir())
			eng, _ := New(talk, runstats.NewStats(nil), opts)
			if _, err := eng.Run(context.Background(), hinted(hints...), out); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			if got := askedOrder(talk); got != c.want {
				t.Errorf("asked %s, want %s", got, c.want)
			}
		})
	}
}

// drainer is a talker that drains its engine as its nth request comes.
type drainer struct {
	talker
	eng  *Engine
	nth  int
	mu   sync.Mutex
	seen int
}

func (d *drainer) Complete(ctx context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	d.mu.Lock()
	d.seen++
	if d.seen == d.nth {
		d.eng.Drain()
	}
	d.mu.Unlock()
	return d.talker.Complete(ctx, req, onDelta)
}

// A drain in the middle of a window leaves the rows it holds unasked (no
// record, nothing pending); the resume asks exactly them and the rest, and
// every key is written once.
func TestLongestFirstDrainMidWindow(t *testing.T) {
	hints := make([]int, 80)
	for i := range hints {
		hints[i] = (i * 37) % 101
	}
	dir := t.TempDir()
	opts := testOptions(2)
	opts.UniqueIDs, opts.LongestFirst = true, true

	d := &drainer{nth: 5}
	out := openSink(t, dir)
	eng, _ := New(d, runstats.NewStats(nil), opts)
	d.eng = eng
	src := hinted(hints...)
	if _, err := eng.Run(context.Background(), src, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	first := readIDs(t, dir)
	asked := len(d.sent)
	if asked >= len(hints) || src.next-asked < longestWindow*opts.Concurrency-1 {
		t.Fatalf("drain: %d rows read, %d asked: want the window's %d rows read and not asked", src.next, asked, longestWindow*opts.Concurrency-1)
	}
	if len(first) != asked {
		t.Fatalf("drain: %d rows asked, %d written", asked, len(first))
	}

	talk := &talker{}
	out = openSink(t, dir)
	eng, _ = New(talk, runstats.NewStats(nil), opts)
	if _, err := eng.Run(context.Background(), hinted(hints...), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(talk.sent); got != len(hints)-asked {
		t.Errorf("resume asked %d, want %d", got, len(hints)-asked)
	}
	all := readIDs(t, dir)
	for i := range hints {
		if id := fmt.Sprint(i); all[id] != 1 {
			t.Errorf("row %s written %d times", id, all[id])
		}
	}
	if len(all) != len(hints) {
		t.Errorf("%d ids written, want %d", len(all), len(hints))
	}
}

// gatedSource hands out row i only once row i-1 was asked: a producer that
// held rows back would wait for itself (it is then said, not hung).
type gatedSource struct {
	*sliceSource
	asked []chan struct{}
	t     *testing.T
}

func (g *gatedSource) Next() (dataset.Prompt, error) {
	if i := g.next; i > 0 && i < len(g.asked) {
		select {
		case <-g.asked[i-1]:
		case <-time.After(10 * time.Second): // only a failing run waits
			g.t.Errorf("row %d read before row %d was asked: the producer buffers", i, i-1)
		}
	}
	return g.sliceSource.Next()
}

// gateTalker closes a row's channel as it is asked.
type gateTalker struct {
	talker
	asked []chan struct{}
}

func (c *gateTalker) Complete(ctx context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	var i int
	fmt.Sscanf(req.Messages[len(req.Messages)-1].Content, "prompt %d", &i)
	close(c.asked[i])
	return c.talker.Complete(ctx, req, onDelta)
}

// Rows without a hint go straight through with longest_first on: each row
// is asked before the next is read.
func TestLongestFirstNoHintsNoBuffering(t *testing.T) {
	const n = 12
	asked := make([]chan struct{}, n)
	for i := range asked {
		asked[i] = make(chan struct{})
	}
	src := &gatedSource{sliceSource: newSliceSource(numberedIDs(n)...), asked: asked, t: t}
	talk := &gateTalker{asked: asked}
	opts := testOptions(4)
	opts.UniqueIDs, opts.LongestFirst = true, true
	out := openSink(t, t.TempDir())
	eng, _ := New(talk, runstats.NewStats(nil), opts)
	if _, err := eng.Run(context.Background(), src, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if got := askedOrder(&talk.talker); len(strings.Fields(got)) != n {
		t.Errorf("asked %q, want %d rows", got, n)
	}
}

// windowOrder is the order a window of size rows starts hints in, worked
// by selection over a list (the code keeps a heap): once the window holds
// size rows, the longest (the earliest of equals) starts; a row without a
// hint goes straight through while the window is empty.
func windowOrder(hints []int, size int) string {
	var win, out []int
	pop := func() {
		best := 0
		for k, i := range win {
			if hints[i] > hints[win[best]] {
				best = k
			}
		}
		out = append(out, win[best])
		win = slices.Delete(win, best, best+1)
	}
	for i, h := range hints {
		if h == 0 && len(win) == 0 {
			out = append(out, i)
			continue
		}
		if win = append(win, i); len(win) >= size {
			pop()
		}
	}
	for len(win) > 0 {
		pop()
	}
	s := make([]string, len(out))
	for k, i := range out {
		s[k] = strconv.Itoa(i)
	}
	return strings.Join(s, " ")
}
