package hidden

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/synthgen/synthgen/sink"
)

// LogName is the kept log inside DirName: one JSON line per kept file,
// appended and fsynced after the file is in place. A file is kept only
// once its line is durable; recovery removes the others.
const LogName = "kept.jsonl"

// Entry is one kept file.
type Entry struct {
	ID     string `json:"id"`
	Sample int    `json:"sample"`
	Turn   int    `json:"turn"`
	File   string `json:"file"`
	Tokens int    `json:"tokens"`
	Bytes  int64  `json:"bytes"`
}

type unitKey struct {
	k    sink.Key
	turn int
}

// Log is the durable set of kept units. Its methods are safe for
// concurrent use: the pass's workers mark through it.
type Log struct {
	mu    sync.Mutex
	f     *os.File
	path  string
	kept  map[unitKey]Entry
	bytes int64
}

// OpenLog reads dir's log (cutting a torn last line a kill left) and opens
// it for appending.
func OpenLog(dir string) (*Log, error) {
	path := dir + "/" + LogName
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	l := &Log{path: path, kept: map[unitKey]Entry{}}
	good := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		end := good + len(sc.Bytes()) + 1
		if end > len(data) || data[end-1] != '\n' {
			break // the last line has no newline: an append cut by a kill
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.File == "" {
			return nil, fmt.Errorf("%s:%d: not a kept entry: %v", path, line, err)
		}
		l.add(e)
		good = end
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := f.Truncate(int64(good)); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate %s: %w", path, err)
	}
	if _, err := f.Seek(int64(good), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek %s: %w", path, err)
	}
	l.f = f
	return l, nil
}

func (l *Log) add(e Entry) {
	k := unitKey{sink.Key{ID: e.ID, Sample: e.Sample}, e.Turn}
	if old, ok := l.kept[k]; ok {
		l.bytes -= old.Bytes
	}
	l.kept[k] = e
	l.bytes += e.Bytes
}

// Has reports whether u's file is kept.
func (l *Log) Has(u Unit) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.kept[unitKey{u.Key, u.Turn}]
	return ok
}

// Mark appends e and fsyncs the log: from its return the file is kept.
func (l *Log) Mark(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("append %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", l.path, err)
	}
	l.add(e)
	return nil
}

// Files is the set of kept file names.
func (l *Log) Files() map[string]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]Entry, len(l.kept))
	for _, e := range l.kept {
		m[e.File] = e
	}
	return m
}

// Bytes is the kept files' total size.
func (l *Log) Bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// Close closes the log file.
func (l *Log) Close() error { return l.f.Close() }
