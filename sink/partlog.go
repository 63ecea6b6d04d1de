package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/sink/layout"
)

// The part log: finalizing a part appends one line (its ShardInfo as
// JSON) to a log beside manifest.json and fsyncs it, instead of rewriting
// the whole manifest, whose list grows with the job: the bookkeeping of a
// part costs the same at the first part and at the ten-thousandth.
// manifest.json is rewritten only at Open, at Close and when a forced run
// takes the job over; each rewrite folds the log into its parts (the
// compaction) and names the log the run appends to from then on (none
// after Close).
//
// Each Open starts a log of its own name, manifest.parts.RUN.jsonl (RUN
// the run's index in runs), and the manifest names it in shard_log: a log
// the manifest does not name was folded already (a crash came between the
// rewrite of the manifest and the removal of the log) or never reached a
// manifest, and is only removed. So the rename of a compacted manifest is
// the one step that moves the parts from the log to the manifest, and no
// crash can make a part the manifest let go (a loss --force accepted)
// come back from an old log. A log is never appended to after a crash:
// its torn last line, if any, is skipped when it is read and goes with
// the log at the next compaction.
//
//	crash state                                 what reading the manifest does
//	log with a torn last line                   skips the bytes after the last '\n'
//	log with a line holding NUL bytes           stops there (a power loss's zero fill)
//	log part also in manifest.json             listed once (by name)
//	log part missing from data/                listed, so the missing-part rules apply
//	part renamed into data/, not in the log    adopted by recovery, as before the log
//	log not named by manifest.json              ignored, removed by the next Open

// partLogName is the log run appends to.
func partLogName(run int) string { return layout.PartLogName(run) }

// IsPartLog reports whether name is a part log's name (current or stale).
func IsPartLog(name string) bool { return layout.IsPartLog(name) }

// readPartLog adds to m.Parts the parts of the log m names that it does
// not list yet. A missing log is an empty one (no part was finalized
// since the manifest named it).
func readPartLog(dir string, m *Manifest) error {
	if m.PartLog == "" {
		return nil
	}
	if !IsPartLog(m.PartLog) {
		return fmt.Errorf("%s: shard_log %q is not a shard log's name", filepath.Join(dir, ManifestName), m.PartLog)
	}
	path := filepath.Join(dir, m.PartLog)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read shard log: %w", err)
	}
	defer f.Close()
	listed := make(map[string]bool, len(m.Parts))
	for _, sh := range m.Parts {
		listed[sh.Name] = true
	}
	_, err = ForEachLine(f, func(line []byte, n int) error {
		if bytes.IndexByte(line, 0) >= 0 {
			return errZeroFill // nothing from here on was fsynced
		}
		var sh PartInfo
		if err := json.Unmarshal(line, &sh); err != nil {
			return fmt.Errorf("%s:%d: %w: %s", path, n, err, fixPartLog)
		}
		if _, ok := ParsePart(sh.Name); !ok {
			return fmt.Errorf("%s:%d: %q is not a shard name: %s", path, n, sh.Name, fixPartLog)
		}
		if !listed[sh.Name] {
			listed[sh.Name] = true
			m.Parts = append(m.Parts, sh)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errZeroFill) {
		return err
	}
	return nil
}

// fixPartLog is what to do about a part log line that no crash makes.
const fixPartLog = "delete the line by hand; a run adopts the shard it listed from data/, checked as it is now"

// removeStalePartLogs removes every part log but keep (the one the
// manifest on disk names, "" for none), then fsyncs dir. It is called only
// after the manifest that folded them is durable.
func removeStalePartLogs(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	removed := false
	for _, e := range entries {
		if name := e.Name(); IsPartLog(name) && name != keep {
			path := filepath.Join(dir, name)
			step("remove", path)
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", path, err)
			}
			removed = true
		}
	}
	if removed {
		return disk.SyncDir(dir)
	}
	return nil
}

// partLog is the log a run appends its finalized parts to, created with
// the first of them.
type partLog struct {
	path string
	f    *os.File
	buf  []byte
}

// append writes info as one line and fsyncs it: once it returns, the part
// is listed as durably as a manifest rewrite would list it.
func (l *partLog) append(info *PartInfo) error {
	if l.f == nil {
		// O_EXCL: each run's log is new; finding one means a name was
		// reused, and appending could mix two runs' lists.
		step("create", l.path)
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("create shard log: %w", err)
		}
		if err := disk.SyncDir(filepath.Dir(l.path)); err != nil {
			_ = f.Close()
			return err
		}
		l.f = f
	}
	line, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode shard log: %w", err)
	}
	l.buf = append(append(l.buf[:0], line...), '\n')
	step("write", l.path)
	if _, err := l.f.Write(l.buf); err != nil {
		return fmt.Errorf("append %s: %w", l.path, err)
	}
	step("fsync", l.path)
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", l.path, err)
	}
	return nil
}

func (l *partLog) close() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
