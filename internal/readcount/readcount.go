// Package readcount lets tests count the bytes package dataset reads from
// each file (a shard of a job split by file must read only its files; a
// resume whose files did not change must not read them again): dataset
// opens every file through Wrap. With no Counter started (always, outside
// tests) Wrap is one atomic load and returns the file itself.
package readcount

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// File is what Wrap returns: an *os.File, or one that counts.
type File interface {
	io.Reader
	io.ReaderAt
	io.Closer
	Stat() (os.FileInfo, error)
}

// Counter holds the bytes read from each file, by absolute path, and the
// files opened.
type Counter struct {
	mu     sync.Mutex
	bytes  map[string]int64
	opened map[string]int
}

var current atomic.Pointer[Counter]

// Start makes a new Counter count every later read until stop is called (a
// test calls it in Cleanup). Tests that count must not run in parallel with
// other dataset readers.
func Start() (c *Counter, stop func()) {
	c = &Counter{bytes: map[string]int64{}, opened: map[string]int{}}
	prev := current.Swap(c)
	return c, func() { current.Store(prev) }
}

// Bytes returns the bytes read from each file so far.
func (c *Counter) Bytes() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.bytes))
	for k, v := range c.bytes {
		out[k] = v
	}
	return out
}

// Opened returns how many times each file was opened so far.
func (c *Counter) Opened() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.opened))
	for k, v := range c.opened {
		out[k] = v
	}
	return out
}

func (c *Counter) add(path string, n int) {
	c.mu.Lock()
	c.bytes[path] += int64(n)
	c.mu.Unlock()
}

// Wrap returns f, counting what is read from it when a Counter is started.
func Wrap(path string, f *os.File) File {
	c := current.Load()
	if c == nil {
		return f
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	c.mu.Lock()
	c.opened[path]++
	c.mu.Unlock()
	return &counted{f: f, path: path, c: c}
}

// counted delegates to its file, every read counted; it has no WriteTo of
// *os.File's, which io.Copy would take past Read.
type counted struct {
	f    *os.File
	path string
	c    *Counter
}

func (f *counted) Close() error               { return f.f.Close() }
func (f *counted) Stat() (os.FileInfo, error) { return f.f.Stat() }

func (f *counted) Read(p []byte) (int, error) {
	n, err := f.f.Read(p)
	f.c.add(f.path, n)
	return n, err
}

func (f *counted) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	f.c.add(f.path, n)
	return n, err
}
