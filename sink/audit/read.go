package audit

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink"
)

// This file reads and checks what Dir finds on disk: each part of
// DIR/data, record by record, and the error files of DIR/errors.

// readData reads every part file of DIR/data in index order.
func (a *Audit) readData(dataDir string, entries []fs.DirEntry) error {
	type named struct {
		name string
		part sink.Part
	}
	var parts []named
	finals := map[string]bool{}
	for _, e := range entries {
		p, ok := sink.ParsePart(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		parts = append(parts, named{e.Name(), p})
		if p.Suffix == "" {
			finals[e.Name()] = true
		}
	}
	slices.SortFunc(parts, func(x, y named) int {
		return cmp.Or(cmp.Compare(x.part.Index, y.part.Index), strings.Compare(x.name, y.name))
	})
	for _, p := range parts {
		path := filepath.Join(dataDir, p.name)
		final := p.part.Final()
		sh := Part{Name: p.name, Format: p.part.Format}
		switch p.part.Suffix {
		case sink.SuffixTmp:
			sh.State, sh.Valid = PartLeftover, true
			a.note("%s: a Parquet conversion cut short; its rows are in the journal or the final shard (the next run removes it)", p.name)
			a.Parts = append(a.Parts, sh)
			continue
		case sink.SuffixJournal:
			if finals[final] {
				// Renamed into place, journal not yet removed: the final
				// file holds every row, so reading both would count twice.
				sh.State, sh.Valid = PartLeftover, true
				a.note("%s: journal of the complete %s (the next run removes it)", p.name, final)
				a.Parts = append(a.Parts, sh)
				continue
			}
		case sink.SuffixOpen:
			if finals[final] {
				sh.State = PartInvalid
				sh.Problem = "both " + final + " and " + p.name + " exist"
				a.problem("both %s and %s exist, which the sink never leaves: keep the one with all records, move the other away", filepath.Join(dataDir, final), path)
				a.Parts = append(a.Parts, sh)
				continue
			}
		}
		temp := p.part.Suffix != ""
		err := a.readPart(path, p.part.Format, temp, temp, &sh)
		if errors.Is(err, errVanished) && !finals[final] {
			// Finalized between the listing and the read: .open renamed,
			// or journal converted then removed. Read what it became.
			sh = Part{Name: final, Format: p.part.Format}
			err = a.readPart(filepath.Join(dataDir, final), p.part.Format, false, true, &sh)
		}
		if err != nil {
			return err
		}
		a.Parts = append(a.Parts, sh)
	}
	return nil
}

// partAcc collects one part's records before they count: an invalid
// part's records are left out of the totals, since moving it away (what
// its problem says to do) makes the next run generate them again.
type partAcc struct {
	keys    []sink.Key
	prompt  int64
	compl   int64
	cached  int64
	cost    float64
	finish  map[string]int64
	records int
	noReas  int64 // records without reasoning
	tags    int64 // records with think tags in content
	tools   ToolCounts
}

func (acc *partAcc) add(rec *sink.Record) {
	acc.keys = append(acc.keys, rec.Key())
	acc.prompt += int64(rec.PromptTokens)
	acc.compl += int64(rec.CompletionTokens)
	acc.cached += int64(rec.CachedTokens)
	acc.cost += rec.Cost
	if acc.finish == nil {
		acc.finish = map[string]int64{}
	}
	acc.finish[rec.FinishReason]++
	acc.records++
	if rec.Reasoning == "" {
		acc.noReas++
	}
	if sink.ThinkTags(rec.Content) {
		acc.tags++
	}
	acc.tools.add(rec)
}

func checkRecord(rec *sink.Record) error {
	if rec.ID == "" {
		return errors.New("id: missing or empty")
	}
	if rec.Sample < 0 {
		return fmt.Errorf("sample: %d is negative", rec.Sample)
	}
	return nil
}

// commit counts a valid part's records and indexes its keys; format is
// the one the file was read as.
func (a *Audit) commit(path, format string, acc *partAcc) error {
	if len(acc.keys) == 0 {
		return nil
	}
	fi := int32(len(a.files))
	a.files = append(a.files, path)
	a.readAs = append(a.readAs, format)
	for _, k := range acc.keys {
		if err := a.index.Add(keyEntry{id: k.ID, sample: int32(k.Sample), file: fi}); err != nil {
			return fmt.Errorf("inspect %s: key index: %w", a.Dir, err)
		}
	}
	a.Records += int64(acc.records)
	a.PromptTokens += acc.prompt
	a.CompletionTokens += acc.compl
	a.CachedTokens += acc.cached
	a.Cost += acc.cost
	a.EmptyReasoning += acc.noReas
	a.ThinkTags += acc.tags
	a.ToolCounts.sum(acc.tools)
	for f, n := range acc.finish {
		a.FinishReasons[f] += n
	}
	return nil
}

// readPart reads one data file. With mayVanish, a file that is gone
// returns errVanished (a writer moved it on) instead of a problem. A
// temporary, and a final part of format JSONL, is read line by line; a
// final part of a converted format (Parquet) through sink.ForEachRecord.
func (a *Audit) readPart(path, format string, temp, mayVanish bool, sh *Part) error {
	if mayVanish {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return errVanished
		}
	}
	if !temp && format != sink.FormatJSONL {
		return a.readConverted(path, format, sh)
	}
	return a.readJSONL(path, temp, mayVanish, sh)
}

// errZeroFill stops the reading of a temporary at a line holding a NUL
// byte.
var errZeroFill = errors.New("line holds a NUL byte")

// readJSONL reads a JSONL part (final, .open or .journal). A final file
// must end in a newline; a temporary may end in a torn line that a writer is
// still appending, which is not read.
func (a *Audit) readJSONL(path string, temp, mayVanish bool, sh *Part) error {
	f, err := os.Open(path)
	if err != nil {
		if mayVanish && errors.Is(err, fs.ErrNotExist) {
			return errVanished
		}
		sh.State, sh.Problem = PartInvalid, err.Error()
		a.problem("%s: %v", path, err)
		return nil
	}
	defer f.Close()
	acc := &partAcc{}
	var bad []string
	badLines := 0
	complete, err := sink.ForEachLine(f, func(line []byte, n int) error {
		if temp && bytes.IndexByte(line, 0) >= 0 {
			// Where a power loss zero-filled the unsynced end: recovery
			// cuts from here, so nothing from here on is a record.
			return errZeroFill
		}
		var rec sink.Record
		err := json.Unmarshal(line, &rec)
		if err == nil {
			err = checkRecord(&rec)
		}
		if err != nil {
			badLines++
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%s:%d: %v", filepath.Base(path), n, err))
			}
			return nil
		}
		acc.add(&rec)
		return nil
	})
	if errors.Is(err, errZeroFill) {
		a.note("%s: ends in NUL bytes a power loss left; the next run cuts them", path)
	} else if err != nil {
		sh.State, sh.Problem = PartInvalid, err.Error()
		a.problem("%s: read: %v", path, err)
		return nil
	}
	sh.Records = acc.records
	if !temp && badLines == 0 {
		if st, err := f.Stat(); err == nil && st.Size() != complete {
			bad = append(bad, fmt.Sprintf("%s:%d: last line is incomplete (%d bytes without a newline)",
				filepath.Base(path), acc.records+1, st.Size()-complete))
			badLines++
		}
	}
	if badLines > 0 {
		sh.State = PartInvalid
		sh.Problem = strings.Join(bad, "; ")
		if badLines > len(bad) {
			sh.Problem += fmt.Sprintf(" (%d bad lines in all)", badLines)
		}
		if temp {
			a.problem("%s is corrupt: %s; the next run refuses it: move it away and rerun to regenerate its records", path, sh.Problem)
		} else {
			a.problem("%s is corrupt: %s; move it away (out of data/) and rerun with --force to regenerate its records", path, sh.Problem)
		}
		return nil
	}
	sh.Valid = true
	sh.State = PartOK
	if temp {
		sh.State = PartOpen
	}
	return a.commit(path, sink.FormatJSONL, acc)
}

// readConverted reads a final part of a converted format (Parquet:
// through parquet-go's generic reader, the footer, the schema and every
// row). The first row that does not read or check makes the part invalid.
func (a *Audit) readConverted(path, format string, sh *Part) error {
	acc := &partAcc{}
	err := sink.ForEachRecord(path, func(rec *sink.Record, _ sink.Span) error {
		if err := checkRecord(rec); err != nil {
			return fmt.Errorf("row %d: %w", acc.records, err)
		}
		acc.add(rec)
		return nil
	})
	if err != nil {
		sh.State, sh.Problem = PartInvalid, err.Error()
		sh.Records = acc.records
		a.problem("%s is corrupt: %v; move it away (out of data/) and rerun with --force to regenerate its records", path, err)
		return nil
	}
	sh.Records, sh.Valid, sh.State = acc.records, true, PartOK
	return a.commit(path, format, acc)
}

// readErrors reads DIR/errors (final and .open files).
func (a *Audit) readErrors(errDir string) error {
	names, err := sink.ErrorFiles(errDir)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", errDir, err)
	}
	for _, name := range names {
		path := filepath.Join(errDir, name)
		temp := strings.HasSuffix(name, sink.SuffixOpen)
		f, err := os.Open(path)
		if temp && errors.Is(err, fs.ErrNotExist) && !slices.Contains(names, strings.TrimSuffix(name, sink.SuffixOpen)) {
			// Renamed to its final name since the listing.
			path = strings.TrimSuffix(path, sink.SuffixOpen)
			f, err = os.Open(path)
		}
		if err != nil {
			if temp && errors.Is(err, fs.ErrNotExist) {
				return errVanished
			}
			a.problem("%s: %v", path, err)
			continue
		}
		var bad string
		_, err = sink.ForEachLine(f, func(line []byte, n int) error {
			var e sink.ErrorRecord
			err := json.Unmarshal(line, &e)
			if err == nil && e.ID == "" {
				err = errors.New("id: missing or empty")
			}
			if err != nil {
				if bad == "" {
					bad = fmt.Sprintf("%s:%d: %v", path, n, err)
				}
				return nil
			}
			a.Errors.Records++
			a.failed[e.Key()] = failure{cause: e.Cause}
			return nil
		})
		_ = f.Close()
		if err != nil {
			a.problem("%s: read: %v", path, err)
		}
		if bad != "" {
			a.problem("%s is corrupt: the next run refuses it; move it away (its keys are requested again)", bad)
		}
	}
	return nil
}
