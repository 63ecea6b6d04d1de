package sink

// Writing: records and error records appended to the part being filled,
// parts finalized, fsyncs within the sync interval, and Close.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Write appends r to the part being filled, finalizes the part when it
// reaches ShardSize, and fsyncs when SyncInterval has elapsed since the last
// sync (every record when it is 0). Writing a key that is already done is a
// bug in the caller: it is refused and nothing is written.
func (s *Sink) Write(r *Record) error {
	if err := s.usable(); err != nil {
		return err
	}
	k := r.Key()
	if err := s.acceptKey("write record", k); err != nil {
		return err
	}
	if err := s.adopt(); err != nil {
		return err
	}
	if s.cur == nil {
		if err := s.openPart(); err != nil {
			return s.fail(err)
		}
	}
	if err := s.cur.encode(r); err != nil {
		return s.fail(err)
	}
	s.keysMu.Lock()
	s.written.Add(k)
	s.keysMu.Unlock()
	s.curKeys.Add(k)
	if s.hasFailed(k) {
		s.failedOpen--
	}
	if s.cur.lines == 1 || compareKeys(k, s.curMin) < 0 {
		s.curMin = k
	}
	if s.cur.lines == 1 || compareKeys(k, s.curMax) > 0 {
		s.curMax = k
	}
	s.man.Runs[s.run].RecordsWritten++
	if s.cur.lines >= s.opts.PartSize {
		if err := s.finalizePart(); err != nil {
			return s.fail(err)
		}
	}
	return s.maybeSync()
}

// acceptKey refuses what must never reach a part: an id JSON would store
// as U+FFFD (a resume would read back another id, never see this key as
// done and write it again), and a key already done (a key is written once).
func (s *Sink) acceptKey(what string, k Key) error {
	if !utf8.ValidString(k.ID) {
		return fmt.Errorf("%s id=%q sample=%d: id is not valid UTF-8", what, k.ID, k.Sample)
	}
	if s.Done(k) {
		return fmt.Errorf("%s id=%q sample=%d: already done: a key is written once", what, k.ID, k.Sample)
	}
	return nil
}

// WriteError appends e under DIR/errors. A key may fail on several runs
// (with RetryErrors); all its error records are kept. An error for a done
// key is a bug in the caller and is refused.
func (s *Sink) WriteError(e *ErrorRecord) error {
	if err := s.usable(); err != nil {
		return err
	}
	k := e.Key()
	if err := s.acceptKey("write error", k); err != nil {
		return err
	}
	if err := s.adopt(); err != nil {
		return err
	}
	if s.errFile == nil {
		name := partName(s.nextErr, FormatJSONL)
		f, err := createAppendFile(filepath.Join(s.errDir, name+SuffixOpen))
		if err != nil {
			return s.fail(err)
		}
		f.onSync = func(n int) { s.durableErrs += n }
		s.errFile, s.errFinal = f, filepath.Join(s.errDir, name)
	}
	if err := s.errFile.encode(e); err != nil {
		return s.fail(err)
	}
	if !s.hasFailed(k) {
		s.keysMu.Lock()
		s.failedNow.Add(k)
		s.keysMu.Unlock()
		s.failedOpen++
	}
	s.man.Runs[s.run].ErrorsWritten++
	if s.errFile.lines >= s.opts.PartSize {
		if err := s.finalizeErrors(); err != nil {
			return s.fail(err)
		}
	}
	return s.maybeSync()
}

// Flush fsyncs everything written so far. The owner calls it every
// SyncInterval so that the tail is durable even when no record arrives.
func (s *Sink) Flush() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.syncAll()
}

// SetOutcome records how this run ended (see Run.Outcome); Close writes it
// to the manifest with the run's end. Called by the writer's owner once
// writing is over.
func (s *Sink) SetOutcome(outcome string) { s.man.Runs[s.run].Outcome = outcome }

// Close finalizes the open parts (no temporary file remains after a clean
// exit), records the run's end in the manifest and releases the directory.
// After a write error it only releases the files: the temporaries stay for
// the next Open to recover.
func (s *Sink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	defer s.lock.Close()
	defer s.log.close()
	if s.err != nil {
		if s.cur != nil {
			_ = s.cur.f.Close()
		}
		if s.errFile != nil {
			_ = s.errFile.f.Close()
		}
		return fmt.Errorf("close %s: %w", s.dir, s.err)
	}
	if s.cur != nil {
		if err := s.finalizePart(); err != nil {
			return fmt.Errorf("close %s: %w", s.dir, err)
		}
	}
	if s.errFile != nil {
		if err := s.finalizeErrors(); err != nil {
			return fmt.Errorf("close %s: %w", s.dir, err)
		}
	}
	t := s.now().UTC()
	s.man.Runs[s.run].EndedAt = &t
	// The compaction: the log's parts join the manifest's list, and the
	// log goes once that rename is durable (writeManifest fsyncs DIR).
	s.man.PartLog = ""
	if err := writeManifest(s.dir, s.man); err != nil {
		return fmt.Errorf("close %s: %w", s.dir, err)
	}
	s.log.close()
	if err := removeStalePartLogs(s.dir, ""); err != nil {
		return fmt.Errorf("close %s: %w", s.dir, err)
	}
	return nil
}

func (s *Sink) usable() error {
	if s.closed {
		return errors.New("sink is closed")
	}
	return s.err
}

// fail makes err sticky: a file may now end in a partial line, and only the
// recovery of the next Open may decide what it holds.
func (s *Sink) fail(err error) error {
	s.err = err
	return err
}

func (s *Sink) openPart() error {
	name := partName(s.nextData, s.opts.Format)
	f, err := createAppendFile(filepath.Join(s.dataDir, name+tempSuffix(s.opts.Format)))
	if err != nil {
		return err
	}
	f.onSync = func(n int) { s.durableRecs += n }
	s.cur, s.curFinal, s.curFmt = f, filepath.Join(s.dataDir, name), s.opts.Format
	s.curKeys.Reset()
	return nil
}

// finalizePart turns the part being filled into a final file and lists it
// in the part log: one line, whatever the number of parts before it. If
// the append fails after the rename, the part is still complete and the
// next Open adopts it.
func (s *Sink) finalizePart() error {
	cur := s.cur
	s.cur = nil
	if err := cur.close(); err != nil {
		return err
	}
	if f := formats[s.curFmt]; !f.lines() {
		rows, err := f.convert(cur.path, s.curFinal)
		if err != nil {
			return err
		}
		if rows != cur.lines {
			return fmt.Errorf("convert %s: %d rows, want %d", cur.path, rows, cur.lines)
		}
	} else {
		step("rename", cur.path)
		if err := os.Rename(cur.path, s.curFinal); err != nil {
			return fmt.Errorf("finalize shard: %w", err)
		}
		if err := disk.SyncDir(s.dataDir); err != nil {
			return err
		}
	}
	s.nextData++
	info := PartInfo{
		Name:    filepath.Base(s.curFinal),
		Format:  s.curFmt,
		Records: cur.lines,
		FirstID: s.curMin.ID,
		LastID:  s.curMax.ID,
		Keys:    s.curKeys.Keys(cur.lines),
	}
	if err := stampPart(s.curFinal, &info); err != nil {
		return err
	}
	s.man.Parts = append(s.man.Parts, info)
	return s.log.append(&info)
}

func (s *Sink) finalizeErrors() error {
	f := s.errFile
	s.errFile = nil
	if err := f.close(); err != nil {
		return err
	}
	step("rename", f.path)
	if err := os.Rename(f.path, s.errFinal); err != nil {
		return fmt.Errorf("finalize errors shard: %w", err)
	}
	s.nextErr++
	return disk.SyncDir(s.errDir)
}

func (s *Sink) maybeSync() error {
	if s.opts.SyncInterval > 0 && s.now().Sub(s.lastSync) < s.opts.SyncInterval {
		return nil
	}
	return s.syncAll()
}

func (s *Sink) syncAll() error {
	for _, f := range []*appendFile{s.cur, s.errFile} {
		if f == nil {
			continue
		}
		if err := f.sync(); err != nil {
			return s.fail(err)
		}
	}
	s.lastSync = s.now()
	return nil
}
