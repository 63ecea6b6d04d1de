// Package extsort sorts more items than memory holds: a Sorter takes them
// one at a time, sorts each batch that fills its memory budget and writes it
// as a sorted run to one temporary file, then merges the runs into one
// sorted stream. inspect's key index, its count of a dataset's keys against
// a directory and export's order of the records all go through it, so that
// what they hold in memory is the budget and a read buffer per run, not a
// few dozen bytes per record.
//
// The runs of a Sorter share one file, created in the directory given
// (beside the output, or the system's temporary directory) and unlinked at
// once where the system allows it (Unix): a killed process leaves nothing
// behind, and the space is the kernel's to reclaim when the file is closed.
// Items that come already in order (row-index ids read in row order) extend
// the last run instead of starting one, so that such input costs one run
// however long it is.
package extsort

import (
	"bufio"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/synthgen/synthgen/internal/diskfault"
)

// Codec says how a Sorter orders, weighs and stores items of type T.
type Codec[T any] struct {
	// Cmp orders items; it must be a total order (Merge's output is the
	// order of a global sort only then).
	Cmp func(a, b T) int
	// Size is about the memory an item holds in a batch, in bytes (its
	// struct and what it points to), for the budget.
	Size func(v T) int
	// Append appends v's encoding to buf; Decode reads it back from
	// exactly the bytes Append wrote. What Decode returns must not share b,
	// which is reused.
	Append func(buf []byte, v T) []byte
	Decode func(b []byte) (T, error)
}

// DefaultBudget is a Sorter's memory for one batch when Options.Budget is
// zero.
const DefaultBudget = 32 << 20

// fanIn is the most runs merged at once: merging more costs a read buffer
// each; past it runs are merged into longer ones first.
const fanIn = 128

// readBuf is the read buffer of each run while runs are merged.
const readBuf = 32 << 10

// Options are where a Sorter spills and how much it holds.
type Options struct {
	Dir     string // directory of the run file; "": os.TempDir()
	Pattern string // os.CreateTemp pattern of the run file; "": ".synthgen-sort-*"
	Budget  int    // bytes of items held before a batch is spilled; 0: DefaultBudget
}

// Sorter sorts items of type T (see the package comment). Add them, then
// call Sorted once, or Freeze and then Sorted as often as needed; Close
// removes the runs. A Sorter is used by one goroutine; the iterators of a
// frozen one may be used by several.
type Sorter[T any] struct {
	c      Codec[T]
	o      Options
	batch  []T
	held   int // Size of batch
	file   *os.File
	named  bool  // file's name is still there (not unlinked): Close removes it
	end    int64 // bytes written to file
	runs   []run
	last   T // the greatest item spilled so far, when runs is not empty
	buf    []byte
	w      *bufio.Writer
	n      int64
	frozen bool
	err    error
}

// run is a sorted run in the file: its bytes and items.
type run struct {
	off, len int64
	items    int64
}

// New returns an empty Sorter.
func New[T any](c Codec[T], o Options) *Sorter[T] {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.Pattern == "" {
		o.Pattern = ".synthgen-sort-*"
	}
	return &Sorter[T]{c: c, o: o}
}

// Len is the number of items added.
func (s *Sorter[T]) Len() int64 { return s.n }

// Add takes v. It returns the error of a spill that failed (a full disk);
// the Sorter is unusable then.
func (s *Sorter[T]) Add(v T) error {
	if s.err != nil {
		return s.err
	}
	if s.frozen {
		return errors.New("extsort: Add after Freeze")
	}
	if s.batch == nil {
		// The batch's room up front, from the first item's size: growing
		// it by doubling would hold the old and the new array at once.
		s.batch = make([]T, 0, min(s.o.Budget/max(s.c.Size(v), 16)+1, 1<<22))
	}
	s.batch = append(s.batch, v)
	s.held += s.c.Size(v)
	s.n++
	if s.held >= s.o.Budget {
		s.err = s.spill()
	}
	return s.err
}

// Freeze ends the adding: the last batch is sorted and spilled too, so that
// the Sorter holds no item in memory, only its file. It is for a Sorter kept
// while others are filled (one per directory of a dataset). A Sorter whose
// items all fit in one batch and that is not frozen keeps them in memory.
func (s *Sorter[T]) Freeze() error {
	if s.err != nil || s.frozen {
		return s.err
	}
	if len(s.batch) > 0 {
		s.err = s.spill()
	}
	s.frozen, s.batch = true, nil // a frozen sorter holds no batch's room either
	return s.err
}

// spill sorts the batch and writes it as a run (or as the end of the last
// run, when it starts at or after that run's last item and that run ends the
// file).
func (s *Sorter[T]) spill() error {
	slices.SortStableFunc(s.batch, s.c.Cmp)
	if s.file == nil {
		f, err := os.CreateTemp(s.dir(), s.o.Pattern)
		if err != nil {
			return fmt.Errorf("sort spill: %w", err)
		}
		s.file, s.named = f, os.Remove(f.Name()) != nil
		s.w = bufio.NewWriterSize(f, 256<<10)
	}
	extend := len(s.runs) > 0 && s.c.Cmp(s.batch[0], s.last) >= 0
	if !extend {
		s.runs = append(s.runs, run{off: s.end})
	}
	r := &s.runs[len(s.runs)-1]
	if err := diskfault.Check("write", s.file.Name()); err != nil {
		return fmt.Errorf("sort spill %s: %w", s.file.Name(), err) // a test's full disk
	}
	for _, v := range s.batch {
		s.buf = s.c.Append(s.buf[:0], v)
		var hdr [binary.MaxVarintLen64]byte
		h := binary.PutUvarint(hdr[:], uint64(len(s.buf)))
		if _, err := s.w.Write(hdr[:h]); err != nil {
			return fmt.Errorf("sort spill %s: %w", s.file.Name(), err)
		}
		if _, err := s.w.Write(s.buf); err != nil {
			return fmt.Errorf("sort spill %s: %w", s.file.Name(), err)
		}
		s.end += int64(h + len(s.buf))
		r.items++
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sort spill %s: %w", s.file.Name(), err)
	}
	r.len = s.end - r.off
	s.last = s.batch[len(s.batch)-1]
	clear(s.batch)
	s.batch, s.held = s.batch[:0], 0
	return nil
}

func (s *Sorter[T]) dir() string {
	if s.o.Dir == "" {
		return os.TempDir()
	}
	return s.o.Dir
}

// Runs is the number of sorted runs on disk (for tests and figures).
func (s *Sorter[T]) Runs() int { return len(s.runs) }

// Sorted returns the items in order. Without Freeze it may be called once,
// after the last Add; after Freeze, any number of times, each iterator
// reading the runs anew.
func (s *Sorter[T]) Sorted() (*Iter[T], error) {
	if s.err != nil {
		return nil, s.err
	}
	if !s.frozen {
		if len(s.runs) == 0 {
			// Everything fits in memory: no file at all.
			slices.SortStableFunc(s.batch, s.c.Cmp)
			batch := s.batch
			s.batch, s.frozen = nil, true
			return &Iter[T]{mem: batch}, nil
		}
		if err := s.Freeze(); err != nil {
			return nil, err
		}
	}
	for len(s.runs) > fanIn {
		if err := s.mergeRuns(); err != nil {
			s.err = err
			return nil, err
		}
	}
	its := make([]*Iter[T], len(s.runs))
	for i, r := range s.runs {
		its[i] = s.runIter(r)
	}
	return Merge(s.c.Cmp, its...), nil
}

// runIter reads one run.
func (s *Sorter[T]) runIter(r run) *Iter[T] {
	br := bufio.NewReaderSize(io.NewSectionReader(s.file, r.off, r.len), readBuf)
	return &Iter[T]{r: br, left: r.items, decode: s.c.Decode, name: s.file.Name()}
}

// mergeRuns merges the first fanIn runs into one written at the end of the
// file; their bytes stay until Close (the file is temporary).
func (s *Sorter[T]) mergeRuns() error {
	its := make([]*Iter[T], fanIn)
	for i, r := range s.runs[:fanIn] {
		its[i] = s.runIter(r)
	}
	m := Merge(s.c.Cmp, its...)
	out := run{off: s.end}
	for {
		v, ok := m.Next()
		if !ok {
			break
		}
		s.buf = s.c.Append(s.buf[:0], v)
		var hdr [binary.MaxVarintLen64]byte
		h := binary.PutUvarint(hdr[:], uint64(len(s.buf)))
		if _, err := s.w.Write(hdr[:h]); err != nil {
			return fmt.Errorf("sort merge %s: %w", s.file.Name(), err)
		}
		if _, err := s.w.Write(s.buf); err != nil {
			return fmt.Errorf("sort merge %s: %w", s.file.Name(), err)
		}
		s.end += int64(h + len(s.buf))
		out.items++
	}
	if err := m.Err(); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sort merge %s: %w", s.file.Name(), err)
	}
	out.len = s.end - out.off
	s.runs = append([]run{out}, s.runs[fanIn:]...)
	return nil
}

// Close removes the runs. The iterators of the Sorter end with it.
func (s *Sorter[T]) Close() error {
	s.batch = nil
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	if s.named {
		if rerr := os.Remove(s.file.Name()); err == nil {
			err = rerr
		}
	}
	s.file = nil
	return err
}

// Iter yields items in order: one run, a batch in memory, or a merge of
// iterators.
type Iter[T any] struct {
	// a batch in memory
	mem []T
	// one run
	r      *bufio.Reader
	left   int64
	decode func([]byte) (T, error)
	buf    []byte
	name   string
	// a merge
	h *mergeHeap[T]
	// a function
	fn func() (T, bool, error)

	err error
}

// Next returns the next item, false at the end or after an error (Err).
func (it *Iter[T]) Next() (T, bool) {
	var zero T
	if it.err != nil {
		return zero, false
	}
	switch {
	case it.fn != nil:
		v, ok, err := it.fn()
		if err != nil {
			it.err = err
			return zero, false
		}
		return v, ok
	case it.h != nil:
		return it.h.next(&it.err)
	case it.r != nil:
		if it.left == 0 {
			return zero, false
		}
		n, err := binary.ReadUvarint(it.r)
		if err != nil {
			it.err = fmt.Errorf("sort run %s: %w", it.name, noEOF(err))
			return zero, false
		}
		it.buf = slices.Grow(it.buf[:0], int(n))[:n]
		if _, err := io.ReadFull(it.r, it.buf); err != nil {
			it.err = fmt.Errorf("sort run %s: %w", it.name, noEOF(err))
			return zero, false
		}
		v, err := it.decode(it.buf)
		if err != nil {
			it.err = fmt.Errorf("sort run %s: %w", it.name, err)
			return zero, false
		}
		it.left--
		return v, true
	default:
		if len(it.mem) == 0 {
			return zero, false
		}
		v := it.mem[0]
		it.mem[0] = zero
		it.mem = it.mem[1:]
		return v, true
	}
}

// Func is an iterator whose items next returns: false at the end, or an
// error that ends the iteration (Err).
func Func[T any](next func() (T, bool, error)) *Iter[T] { return &Iter[T]{fn: next} }

// Err is what ended the iteration early, nil at a normal end.
func (it *Iter[T]) Err() error { return it.err }

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Merge yields the items of its iterators, each in cmp's order, as one
// stream in that order; of equal items, those of an earlier iterator first.
func Merge[T any](cmpf func(a, b T) int, its ...*Iter[T]) *Iter[T] {
	if len(its) == 1 {
		return its[0]
	}
	h := &mergeHeap[T]{cmp: cmpf}
	for i, it := range its {
		if v, ok := it.Next(); ok {
			h.items = append(h.items, mergeItem[T]{v: v, src: i})
		} else if err := it.Err(); err != nil {
			return &Iter[T]{err: err}
		}
	}
	h.its = its
	heap.Init(h)
	return &Iter[T]{h: h}
}

type mergeItem[T any] struct {
	v   T
	src int
}

type mergeHeap[T any] struct {
	cmp   func(a, b T) int
	items []mergeItem[T]
	its   []*Iter[T]
}

func (h *mergeHeap[T]) Len() int { return len(h.items) }
func (h *mergeHeap[T]) Less(i, j int) bool {
	return cmp.Or(h.cmp(h.items[i].v, h.items[j].v), cmp.Compare(h.items[i].src, h.items[j].src)) < 0
}
func (h *mergeHeap[T]) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap[T]) Push(x any)    { h.items = append(h.items, x.(mergeItem[T])) }
func (h *mergeHeap[T]) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

func (h *mergeHeap[T]) next(errp *error) (T, bool) {
	var zero T
	if len(h.items) == 0 {
		return zero, false
	}
	top := h.items[0]
	if v, ok := h.its[top.src].Next(); ok {
		h.items[0].v = v
		heap.Fix(h, 0)
	} else {
		if err := h.its[top.src].Err(); err != nil {
			*errp = err
			return zero, false
		}
		heap.Pop(h)
	}
	return top.v, true
}
