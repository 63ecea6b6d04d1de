package runfiles

// DIR/history.jsonl: the run's figures over time, for `synthgen view`'s
// plots. Each status.json the StatusWriter writes is also appended to it as
// one line, so the file holds every run of the directory, a resumed job's
// runs one after the other. It is bounded for a week-long run: the newest
// historyRecent lines are kept as written, and when the file reaches
// historyMax lines the older ones are thinned to at most historyOld, evenly
// in time (the step between two kept lines doubles as the span grows),
// keeping where a run starts and ends and where the state or the server's
// outage changes. The rewrite is atomic (internal/durable); it leaves at
// most historyRecent+historyOld+1 lines, so the next one comes historyOld-1
// appends later at the earliest, and the cost of an append is constant
// amortized: a compaction copies fewer than historyMax lines.
//
// Lines are appended without an fsync: the history is for plots, and a
// power loss costs its last points, not a record. A torn last line (a
// kill during an append) is cut when the next run opens the file; a reader
// skips a line that does not decode.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink/layout"
)

// HistoryFile is the name of the history in the output directory.
const HistoryFile = layout.HistoryName

// The history's bounds, in lines (a line is about 1.5 KiB with one
// endpoint, more with several): at most historyMax, about 6 MiB.
const (
	historyRecent = 2048                         // the newest lines, kept as written
	historyOld    = 1024                         // older lines left by a compaction, at most
	historyMax    = historyRecent + 2*historyOld // a compaction starts at this many lines
)

// HistoryRecord is one line of history.jsonl: the status.json of that
// moment (its fields at the top level) and the concurrency the run was
// given (a fixed limit, or auto's ceiling; auto's limit of the moment is
// in concurrency_auto).
type HistoryRecord struct {
	StatusRecord
	Concurrency int `json:"concurrency"`
}

// History appends HistoryRecords to DIR/history.jsonl. The file is read
// once, at the first Append (the caller holds the directory's lock by
// then). Safe from any goroutine; a nil History does nothing.
type History struct {
	path string

	mu     sync.Mutex
	opened bool
	lines  []historyLine // the file's complete lines, in order
	size   int64         // bytes of those lines
	recent int           // historyRecent; tests shrink the bounds
	old    int           // historyOld
	max    int           // historyMax
}

// historyLine is what a compaction needs of one line: where it is, and the
// few figures that decide whether it is kept.
type historyLine struct {
	off  int64
	n    int   // bytes, the newline included
	at   int64 // its time, Unix nanoseconds; 0: the line does not decode
	run  int64 // its run's started_at, Unix nanoseconds
	down bool  // server_down_since is set
	st   State
}

// NewHistory appends to the history of dir.
func NewHistory(dir string) *History {
	return &History{path: layout.Dir(dir).History(), recent: historyRecent, old: historyOld, max: historyMax}
}

// Append adds rec as the newest line, compacting the file when it reached
// its bound.
func (h *History) Append(rec HistoryRecord) error {
	if h == nil {
		return nil
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s: %w", h.path, err)
	}
	line = append(line, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.opened {
		if err := h.open(); err != nil {
			return err
		}
		h.opened = true
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append to %s: %w", h.path, err)
	}
	_, werr := f.Write(line)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		h.opened = false // a part may have been written: the next Append reads the file again and cuts it
		return fmt.Errorf("append to %s: %w", h.path, err)
	}
	h.lines = append(h.lines, describe(line, h.size))
	h.size += int64(len(line))
	if len(h.lines) >= h.max {
		return h.compact()
	}
	return nil
}

// open reads the file's lines and cuts a torn tail.
func (h *History) open() error {
	h.lines, h.size = h.lines[:0], 0
	f, err := os.Open(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", h.path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				// A kill during an append: cut it, or the next line would
				// be glued to it.
				if terr := os.Truncate(h.path, h.size); terr != nil {
					return fmt.Errorf("cut the torn last line of %s: %w", h.path, terr)
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", h.path, err)
		}
		h.lines = append(h.lines, describe(line, h.size))
		h.size += int64(len(line))
	}
}

// describe reads what a compaction needs from one line (with its newline)
// at offset off.
func describe(line []byte, off int64) historyLine {
	l := historyLine{off: off, n: len(line)}
	var v struct {
		Time            time.Time  `json:"time"`
		StartedAt       time.Time  `json:"started_at"`
		State           State      `json:"state"`
		ServerDownSince *time.Time `json:"server_down_since"`
	}
	if bytes.IndexByte(line, 0) >= 0 || json.Unmarshal(line, &v) != nil || v.Time.IsZero() {
		return l
	}
	l.at, l.run, l.down, l.st = v.Time.UnixNano(), v.StartedAt.UnixNano(), v.ServerDownSince != nil, v.State
	return l
}

// compact rewrites the file with the newest h.recent lines and the older
// ones thinned (keepOld).
func (h *History) compact() error {
	keep := keepOld(h.lines, len(h.lines)-h.recent, h.old)
	for i := len(h.lines) - h.recent; i < len(h.lines); i++ {
		keep = append(keep, i)
	}
	in, err := os.Open(h.path)
	if err != nil {
		return fmt.Errorf("compact %s: %w", h.path, err)
	}
	defer in.Close()
	out, err := durable.Create(h.path, 0o644)
	if err != nil {
		return fmt.Errorf("compact %s: %w", h.path, err)
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	lines := make([]historyLine, 0, len(keep))
	var size int64
	// Kept lines that follow each other (the newest all do) are copied as
	// one range.
	for j := 0; j < len(keep); {
		from, to := h.lines[keep[j]].off, h.lines[keep[j]].off
		for ; j < len(keep) && h.lines[keep[j]].off == to; j++ {
			l := h.lines[keep[j]]
			to += int64(l.n)
			l.off = size
			size += int64(l.n)
			lines = append(lines, l)
		}
		if _, err := io.Copy(bw, io.NewSectionReader(in, from, to-from)); err != nil {
			out.Abort()
			return fmt.Errorf("compact %s: %w", h.path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		out.Abort()
		return fmt.Errorf("compact %s: %w", h.path, err)
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("compact %s: %w", h.path, err)
	}
	h.lines, h.size = lines, size
	return nil
}

// keepOld returns the indices of the lines before end to keep, at most
// budget of them (one more when a step lands on a mark): the lines that
// begin or end a run, or change the state or the server's outage (while
// they are at most half the budget), and the others greedily, each at least
// a step after the last kept line. The step is a power of two seconds, the
// smallest for which the span of the lines fills at most half the budget,
// so that a second compaction with the same step keeps what the first kept.
// Lines that do not decode are dropped.
func keepOld(lines []historyLine, end, budget int) []int {
	if end <= 0 {
		return nil
	}
	first, last := int64(0), int64(0)
	var bounds, marks int
	boundary := make([]bool, end)
	mark := make([]bool, end)
	prev := -1 // the last line that decodes
	for i := 0; i < end; i++ {
		l := lines[i]
		if l.at == 0 {
			continue
		}
		if first == 0 {
			first = l.at
		}
		last = l.at
		next := i + 1
		for next < len(lines) && lines[next].at == 0 {
			next++
		}
		switch {
		case prev < 0 || lines[prev].run != l.run, next >= len(lines) || lines[next].run != l.run:
			boundary[i] = true
			bounds++
		case lines[prev].st != l.st || lines[prev].down != l.down:
			mark[i] = true
			marks++
		}
		prev = i
	}
	keepMarks := bounds+marks <= budget/2
	keepBounds := bounds <= budget/2
	step := int64(time.Second)
	for (last-first)/step > int64(budget/2) {
		step *= 2
	}
	var keep []int
	lastKept := int64(0)
	for i := 0; i < end; i++ {
		l := lines[i]
		if l.at == 0 {
			continue
		}
		switch {
		case keepBounds && boundary[i], keepMarks && mark[i]:
		case len(keep) == 0 || l.at >= lastKept+step:
		default:
			continue
		}
		keep = append(keep, i)
		lastKept = l.at
	}
	return keep
}
