package dataset

// One read of a local JSONL file at the start instead of two: Stamp hashes
// every byte of it, and counts its rows on the way (as lineReader yields
// them); Count, which the runner calls next, takes that count when the
// file still has the size and modification time it had then, instead of
// reading the file again.

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// lineCounter counts the rows of a JSONL stream written to it: the lines
// (the last one may lack its newline) that are not blank or are over
// maxLineBytes, as lineReader yields them. A byte order mark is the
// caller's to leave out (skipBOM).
type lineCounter struct {
	rows     int64
	cur      int64 // bytes of the line so far
	nonBlank bool  // the line so far holds a byte other than white space
}

func (c *lineCounter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i+1]
		}
		c.cur += int64(len(seg))
		if !c.nonBlank && !blank(seg) {
			c.nonBlank = true
		}
		if i < 0 {
			break
		}
		c.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (c *lineCounter) endLine() {
	if c.nonBlank || c.cur > int64(maxLineBytes) {
		c.rows++
	}
	c.cur, c.nonBlank = 0, false
}

// total ends the stream and returns its rows.
func (c *lineCounter) total() int64 {
	if c.cur > 0 {
		c.endLine()
	}
	return c.rows
}

// counted is a file's row count as Stamp found it.
type counted struct {
	size int64
	mod  time.Time
	rows int64
}

var rowCounts = struct {
	sync.Mutex
	m map[string]counted
}{m: map[string]counted{}}

func countKey(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

func rememberRows(path string, st os.FileInfo, rows int64) {
	rowCounts.Lock()
	defer rowCounts.Unlock()
	rowCounts.m[countKey(path)] = counted{size: st.Size(), mod: st.ModTime(), rows: rows}
}

// rememberedRows is the count Stamp found for path, if the file has the
// size and modification time it had then.
func rememberedRows(path string) (int64, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	rowCounts.Lock()
	defer rowCounts.Unlock()
	c, ok := rowCounts.m[countKey(path)]
	if !ok || c.size != st.Size() || !c.mod.Equal(st.ModTime()) {
		return 0, false
	}
	return c.rows, true
}
