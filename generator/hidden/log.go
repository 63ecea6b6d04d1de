package hidden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// LogName is the kept log inside DirName: one JSON line per kept file,
// appended and fsynced after the file is in place. A file is kept only
// once its line is durable; recovery removes the others.
const LogName = layout.HiddenLogName

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
	size  int64 // the log's length: its complete lines
	// broken is the error of a failed append: a part of a line may be on
	// disk, so no line may follow it in this process; the next OpenLog
	// cuts the part.
	broken error
}

// OpenLog reads dir's log (cutting a torn last line a kill left) and opens
// it for appending.
func OpenLog(dir string) (*Log, error) {
	l, good, err := readLog(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", l.path, err)
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate %s: %w", l.path, err)
	}
	if _, err := f.Seek(good, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek %s: %w", l.path, err)
	}
	l.f, l.size = f, good
	return l, nil
}

// ReadLog reads dir's log without changing it (for inspect, while a pass
// may be appending): a torn last line is left out, not cut. Close is not
// needed on the result.
func ReadLog(dir string) (*Log, error) {
	l, _, err := readLog(dir)
	return l, err
}

// readLog parses the complete lines of dir's log; good is their length.
func readLog(dir string) (l *Log, good int64, err error) {
	path := filepath.Join(dir, LogName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	l = &Log{path: path, kept: map[unitKey]Entry{}}
	for line := 1; len(data) > 0; line++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // the last line has no newline: an append cut by a kill
		}
		var e Entry
		if err := json.Unmarshal(data[:i], &e); err != nil || e.File == "" {
			return nil, 0, fmt.Errorf("%s:%d: not a kept entry: %v", path, line, err)
		}
		l.add(e)
		good += int64(i + 1)
		data = data[i+1:]
	}
	return l, good, nil
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
	if l.broken != nil {
		return l.broken
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		l.broken = fmt.Errorf("append %s: %w", l.path, err)
		_ = l.f.Truncate(l.size) // best effort; OpenLog cuts a torn tail anyway
		return l.broken
	}
	if err := l.f.Sync(); err != nil {
		// The line may or may not be durable: the file it names is not
		// counted kept here; if the line survives, the next run keeps it.
		l.broken = fmt.Errorf("fsync %s: %w", l.path, err)
		return l.broken
	}
	l.size += int64(len(line)) + 1
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

// Close closes the log file (nothing for a log from ReadLog).
func (l *Log) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
