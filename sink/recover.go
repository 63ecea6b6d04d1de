package sink

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink/keyset"
)

// Recovery: what Open finds in DIR/data and DIR/errors after any crash, and
// what it does about it. Every step is idempotent, so a crash during recovery
// is recovered by the next Open the same way.
//
//	part-N.jsonl.open                  cut a torn last line (or from a line holding NUL
//	                                   bytes: a power loss's zero fill), fsync, then
//	                                   rename to part-N.jsonl
//	                                   (removed when it holds no complete line); a new
//	                                   part is started rather than appending to it
//	part-N.parquet.journal             cut a torn last line, convert to part-N.parquet
//	part-N.parquet.journal + .parquet  the Parquet file is complete (it appears only by
//	                                   rename): remove the journal
//	part-N.parquet.tmp                 a conversion cut short: removed; its rows are in
//	                                   the journal (converted again), or in the final file
//	final part not in the manifest    adopted (a crash between rename and the append to
//	                                   the part log; "the manifest" is manifest.json and
//	                                   the log it names, see partlog.go)
//	manifest part missing on disk     error naming it; with --force the loss is accepted
//	                                   and its keys are generated again
//	final part that does not parse    error naming file (and line); never dropped
//	a key in two parts                error naming both files
//	a complete line that is not JSON   error naming file:line (in .open and .journal too,
//	                                   unless it holds a NUL byte: see recoverTail)

func hasParts(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if _, ok := ParsePart(e.Name()); ok {
			return true, nil
		}
	}
	return false, nil
}

type recovered struct {
	parts    []PartInfo // final data parts, in index order
	nextData int
	nextErr  int
	notes    []string
}

// recover resolves the temporaries, reads the keys of every final part and
// reconciles them with the previous manifest (nil when there is none).
func (s *Sink) recover(old *Manifest) (*recovered, error) {
	rec := &recovered{}
	finals, next, notes, err := settleDir(s.dataDir)
	if err != nil {
		return nil, err
	}
	rec.notes = append(rec.notes, notes...)
	rec.nextData = next

	// The key set: every final part's ids, loaded in bulk (sink/keyset);
	// its bitmaps are sized from the manifest. A duplicate costs nothing
	// to remember where it came from: when one turns up, the parts are
	// read again to name both files (findDuplicate).
	hint := s.opts.PartSize
	if old != nil {
		for _, sh := range old.Parts {
			hint += sh.Records
		}
	}
	s.done = keyset.NewBulk(hint)
	listed := map[string]*PartInfo{}
	if old != nil {
		for i := range old.Parts {
			listed[old.Parts[i].Name] = &old.Parts[i]
		}
	}
	for i := range finals {
		info, err := s.readPart(finals, i, listed[finals[i]])
		if err != nil {
			return nil, err
		}
		rec.parts = append(rec.parts, info)
	}
	if f, dup := s.done.FinishBulk(); dup {
		return nil, s.findDuplicate(finals, func(k Key) bool { return keyset.FingerprintOf(k) == f })
	}
	if old != nil {
		notes, err := s.reconcile(old, rec)
		if err != nil {
			return nil, err
		}
		rec.notes = append(rec.notes, notes...)
	}

	errorLines, err := s.recoverErrors(rec)
	if err != nil {
		return nil, err
	}
	s.failed.Compact()
	if old != nil {
		creditKilledRun(old.Runs, rec.parts, errorLines)
	}
	return rec, nil
}

// readPart adds the keys of finals[i] to the key set and returns its
// PartInfo: from the manifest's summary when the file is as listed (its
// keys are the summary's), else read from the part.
func (s *Sink) readPart(finals []string, i int, listed *PartInfo) (PartInfo, error) {
	name := finals[i]
	path := filepath.Join(s.dataDir, name)
	info := PartInfo{Name: name, Format: strings.TrimPrefix(filepath.Ext(name), ".")}
	var lo, hi Key
	var sum keyset.Summary
	trusted := trustSummary(path, listed)
	visit := func(k Key, _ int) error {
		if s.done.AddBulk(k) {
			return s.findDuplicate(finals[:i+1], func(d Key) bool { return d == k })
		}
		if info.Records == 0 || compareKeys(k, lo) < 0 {
			lo = k
		}
		if info.Records == 0 || compareKeys(k, hi) > 0 {
			hi = k
		}
		info.Records++
		if !trusted {
			sum.Add(k)
		}
		return nil
	}
	if trusted {
		if _, err := keyset.ForEachSummaryKey(listed.Keys, func(k Key) error { return visit(k, 0) }); err != nil {
			return info, fmt.Errorf("%s: shard %s: %w: remove its \"keys\" from the manifest and the shard is read instead",
				filepath.Join(s.dir, ManifestName), name, err)
		}
		info.Keys = listed.Keys
	} else {
		if _, err := formats[info.Format].keys(path, visit); err != nil {
			return info, err
		}
		info.Keys = sum.Keys(info.Records)
	}
	info.FirstID, info.LastID = lo.ID, hi.ID
	return info, nil
}

// recoverErrors settles errors/ and reads its keys into the failed set;
// it returns the number of error records on disk.
func (s *Sink) recoverErrors(rec *recovered) (errorLines int64, err error) {
	errFinals, nextErr, notes, err := settleDir(s.errDir)
	if err != nil {
		return 0, err
	}
	rec.notes = append(rec.notes, notes...)
	rec.nextErr = nextErr
	for _, name := range errFinals {
		if !strings.HasSuffix(name, suffixJSONL) {
			return 0, fmt.Errorf("%s: errors are JSONL only", filepath.Join(s.errDir, name))
		}
		if _, err := scanJSONLKeys(filepath.Join(s.errDir, name), func(k Key, _ int) error {
			errorLines++
			if !s.failed.Add(k) && !s.done.Has(k) {
				s.failedOpen++
			}
			return nil
		}); err != nil {
			return 0, err
		}
	}
	return errorLines, nil
}

// creditKilledRun gives a run that never closed (kill -9, OOM, a reboot:
// the last of runs, with no end) the records and error records it left on
// disk, which its count, written only when a run closes, lacks: what the
// directory holds beyond what every other run wrote.
func creditKilledRun(runs []Run, parts []PartInfo, errorLines int64) {
	last := len(runs) - 1
	if last < 0 || runs[last].EndedAt != nil {
		return
	}
	var records, others, otherErrors int64
	for _, p := range parts {
		records += int64(p.Records)
	}
	for _, r := range runs[:last] {
		others += r.RecordsWritten
		otherErrors += r.ErrorsWritten
	}
	runs[last].RecordsWritten = max(runs[last].RecordsWritten, records-others)
	runs[last].ErrorsWritten = max(runs[last].ErrorsWritten, errorLines-otherErrors)
}

// trustSummary says whether the keys listed recorded for the final part at
// path may stand for reading it: it has a summary and a checksum, and the
// file has the size and modification time it had when it was written (the
// rule by which reconcile takes a part as unchanged without hashing it).
func trustSummary(path string, listed *PartInfo) bool {
	if listed == nil || len(listed.Keys) == 0 || listed.XXH64 == "" {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Size() == listed.Size && st.ModTime().Equal(listed.ModTime)
}

// findDuplicate reads the final parts again, in order, for the keys match
// takes, and returns the error naming the two files that hold one key (the
// same file twice when a part holds it twice). The key set keeps no part
// per key, so the price of naming them is paid only when a directory is
// refused.
func (s *Sink) findDuplicate(finals []string, match func(Key) bool) error {
	first := map[Key]string{}
	for _, name := range finals {
		path := filepath.Join(s.dataDir, name)
		var found error
		_, err := formatOf(name).keys(path, func(k Key, _ int) error {
			if !match(k) {
				return nil
			}
			if prev, ok := first[k]; ok {
				found = fmt.Errorf("key id=%q sample=%d is in both %s and %s: remove one copy by hand", k.ID, k.Sample, prev, path)
				return found
			}
			first[k] = path
			return nil
		})
		if found != nil {
			return found
		}
		if err != nil {
			return err
		}
	}
	return errors.New("a key is in two shards, but reading them again found none: the files changed during the resume; run it again")
}

// reconcile compares what is on disk with the previous manifest. The disk
// is the truth about keys; the manifest is the truth about what should be
// there, so a part it lists that is gone means records were lost.
func (s *Sink) reconcile(old *Manifest, rec *recovered) ([]string, error) {
	onDisk := make(map[string]int, len(rec.parts))
	for i, sh := range rec.parts {
		onDisk[sh.Name] = i
	}
	var notes, missing, changed []string
	listed := make(map[string]bool, len(old.Parts))
	for _, sh := range old.Parts {
		listed[sh.Name] = true
		if p, ok := ParsePart(sh.Name); ok && p.Index >= rec.nextData {
			// Never reuse the name of a lost part.
			rec.nextData = p.Index + 1
		}
		i, ok := onDisk[sh.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%d records)", sh.Name, sh.Records))
			continue
		}
		if got := rec.parts[i].Records; got != sh.Records {
			changed = append(changed, fmt.Sprintf("%s: %d records on disk, %d in the manifest", sh.Name, got, sh.Records))
			continue
		}
		why, err := partChanged(filepath.Join(s.dataDir, sh.Name), sh, &rec.parts[i])
		if err != nil {
			return nil, err
		}
		if why != "" {
			changed = append(changed, sh.Name+": "+why)
		}
	}
	for i, sh := range rec.parts {
		if !listed[sh.Name] {
			notes = append(notes, fmt.Sprintf("adopted %s (%d records), not yet in the manifest", sh.Name, sh.Records))
		}
		if rec.parts[i].XXH64 == "" {
			// Adopted, accepted by force, or listed before checksums were
			// recorded: it is taken as it is now.
			if err := stampPart(filepath.Join(s.dataDir, sh.Name), &rec.parts[i]); err != nil {
				return nil, err
			}
		}
	}
	if len(missing)+len(changed) > 0 {
		if !s.opts.Force {
			var b strings.Builder
			if len(missing) > 0 {
				fmt.Fprintf(&b, "shards listed in the manifest are missing from %s: %s", s.dataDir, strings.Join(missing, ", "))
			}
			if len(changed) > 0 {
				if b.Len() > 0 {
					b.WriteString("; ")
				}
				fmt.Fprintf(&b, "shards changed since they were written: %s", strings.Join(changed, ", "))
			}
			b.WriteString("; restore them from a copy, or move a changed shard out of data/ and rerun with --force: its records are generated again")
			return nil, errors.New(b.String())
		}
		for _, m := range missing {
			notes = append(notes, forcedNote+"lost "+m+", its records are generated again")
		}
		for _, c := range changed {
			notes = append(notes, forcedNote+"accepted "+c)
		}
		for i := range rec.parts {
			// What was accepted is the part from now on.
			if err := stampPart(filepath.Join(s.dataDir, rec.parts[i].Name), &rec.parts[i]); err != nil {
				return nil, err
			}
		}
	}
	return notes, nil
}

// settleDir resolves every temporary file of a part directory into final
// parts or nothing (see the table at the top of this file) and returns the
// final names in index order and the next free index.
func settleDir(dir string) (finals []string, next int, notes []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("read %s: %w", dir, err)
	}
	byName, next := partFilesOf(entries)
	names := slices.SortedFunc(maps.Keys(byName), func(a, b string) int {
		return cmp.Or(cmp.Compare(byName[a].index, byName[b].index), strings.Compare(a, b))
	})
	changed := false
	for _, name := range names {
		sh := byName[name]
		n, err := sh.settle(dir, name)
		if err != nil {
			return nil, 0, nil, err
		}
		notes = append(notes, n...)
		changed = changed || len(n) > 0
		if sh.final {
			finals = append(finals, name)
		}
	}
	if changed {
		if err := disk.SyncDir(dir); err != nil {
			return nil, 0, nil, err
		}
	}
	return finals, next, notes, nil
}

// partFiles are the files of one part on disk: its final name and the
// temporaries beside it.
type partFiles struct {
	index                     int
	format                    string
	final, open, journal, tmp bool
}

// partFilesOf groups a directory's part files by their final name, and
// gives the index after the highest.
func partFilesOf(entries []os.DirEntry) (byName map[string]*partFiles, next int) {
	byName = map[string]*partFiles{}
	for _, e := range entries {
		p, ok := ParsePart(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		base := partName(p.Index, p.Format)
		sh := byName[base]
		if sh == nil {
			sh = &partFiles{index: p.Index, format: p.Format}
			byName[base] = sh
		}
		switch p.Suffix {
		case "":
			sh.final = true
		case SuffixOpen:
			sh.open = true
		case SuffixJournal:
			sh.journal = true
		case SuffixTmp:
			sh.tmp = true
		}
		next = max(next, p.Index+1)
	}
	return byName, next
}

// settle leaves part name of dir final or gone: a leftover conversion is
// removed, an open part or a journal becomes the final part (or goes,
// when empty), a journal beside its final part goes. It returns a note
// for each change (none: nothing changed).
func (sh *partFiles) settle(dir, name string) (notes []string, err error) {
	final := filepath.Join(dir, name)
	if sh.tmp {
		// A conversion cut short is never completed, only redone: its
		// rows are in the journal (converted again below) or, when the
		// journal is gone, in the final file, whose rename is what
		// allows the journal's removal. Nothing in it is unique.
		step("remove", final+SuffixTmp)
		if err := os.Remove(final + SuffixTmp); err != nil {
			return nil, fmt.Errorf("remove %s: %w", final+SuffixTmp, err)
		}
		notes = append(notes, "removed leftover "+name+SuffixTmp)
	}
	switch {
	case sh.open && sh.final:
		return nil, fmt.Errorf("both %s and %s exist, which the sink never leaves: keep the one with all records and remove the other",
			final, final+SuffixOpen)
	case sh.open:
		n, err := settleTemp(final+SuffixOpen, func() error {
			step("rename", final+SuffixOpen)
			if err := os.Rename(final+SuffixOpen, final); err != nil {
				return fmt.Errorf("finalize shard: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if n > 0 {
			sh.final = true
			return append(notes, fmt.Sprintf("recovered %s (%d records) from %s", name, n, name+SuffixOpen)), nil
		}
		return append(notes, "removed empty "+name+SuffixOpen), nil
	case sh.journal && sh.final:
		step("remove", final+SuffixJournal)
		if err := os.Remove(final + SuffixJournal); err != nil {
			return nil, fmt.Errorf("remove %s: %w", final+SuffixJournal, err)
		}
		return append(notes, "removed journal "+name+SuffixJournal+" of complete "+name), nil
	case sh.journal:
		var rows int
		n, err := settleTemp(final+SuffixJournal, func() error {
			var err error
			rows, err = formats[sh.format].convert(final+SuffixJournal, final)
			return err
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return append(notes, "removed empty "+name+SuffixJournal), nil
		}
		if rows != n {
			return nil, fmt.Errorf("convert %s: %d rows, want %d", final+SuffixJournal, rows, n)
		}
		sh.final = true
		return append(notes, fmt.Sprintf("recovered %s (%d records) from %s", name, n, name+SuffixJournal)), nil
	}
	return notes, nil
}

// settleTemp cuts the torn tail of a temporary JSONL file and, when it holds
// records, runs finalize; an empty one is removed. It returns the number of
// records.
func settleTemp(path string, finalize func() error) (int, error) {
	n, err := recoverTail(path)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		step("remove", path)
		if err := os.Remove(path); err != nil {
			return 0, fmt.Errorf("remove %s: %w", path, err)
		}
		return 0, nil
	}
	if err := finalize(); err != nil {
		return 0, err
	}
	return n, nil
}
