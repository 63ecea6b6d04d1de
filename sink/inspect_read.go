package sink

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

	"github.com/parquet-go/parquet-go"
)

// This file reads and checks what Inspect finds on disk: each shard of
// DIR/data, record by record, and the error files of DIR/errors.

// readData reads every shard file of DIR/data in index order.
func (r *Report) readData(dataDir string, entries []fs.DirEntry) error {
	type named struct {
		name string
		part partFile
	}
	var parts []named
	finals := map[string]bool{}
	for _, e := range entries {
		p, ok := parsePart(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		parts = append(parts, named{e.Name(), p})
		if p.suffix == "" {
			finals[e.Name()] = true
		}
	}
	slices.SortFunc(parts, func(a, b named) int {
		return cmp.Or(cmp.Compare(a.part.index, b.part.index), strings.Compare(a.name, b.name))
	})
	for _, p := range parts {
		path := filepath.Join(dataDir, p.name)
		final := shardName(p.part.index, p.part.format)
		sh := ShardReport{Name: p.name, Format: p.part.format}
		switch p.part.suffix {
		case suffixTmp:
			sh.State, sh.Valid = ShardLeftover, true
			r.note("%s: a Parquet conversion cut short; its rows are in the journal or the final shard (the next run removes it)", p.name)
			r.Shards = append(r.Shards, sh)
			continue
		case suffixJournal:
			if finals[final] {
				// Renamed into place, journal not yet removed: the final
				// file holds every row, so reading both would count twice.
				sh.State, sh.Valid = ShardLeftover, true
				r.note("%s: journal of the complete %s (the next run removes it)", p.name, final)
				r.Shards = append(r.Shards, sh)
				continue
			}
		case suffixOpen:
			if finals[final] {
				sh.State = ShardInvalid
				sh.Problem = "both " + final + " and " + p.name + " exist"
				r.problem("both %s and %s exist, which the sink never leaves: keep the one with all records, move the other away", filepath.Join(dataDir, final), path)
				r.Shards = append(r.Shards, sh)
				continue
			}
		}
		temp := p.part.suffix != ""
		err := r.readShard(path, p.part.format, temp, temp, &sh)
		if errors.Is(err, errVanished) && !finals[final] {
			// Finalized between the listing and the read: .open renamed,
			// or journal converted then removed. Read what it became.
			sh = ShardReport{Name: final, Format: p.part.format}
			err = r.readShard(filepath.Join(dataDir, final), p.part.format, false, true, &sh)
		}
		if err != nil {
			return err
		}
		r.Shards = append(r.Shards, sh)
	}
	return nil
}

// shardAcc collects one shard's records before they count: an invalid
// shard's records are left out of the totals, since moving it away (what
// its problem says to do) makes the next run generate them again.
type shardAcc struct {
	keys    []Key
	prompt  int64
	compl   int64
	finish  map[string]int64
	records int
	noReas  int64 // records without reasoning
	tags    int64 // records with think tags in content
}

func (a *shardAcc) add(rec *Record) {
	a.keys = append(a.keys, rec.Key())
	a.prompt += int64(rec.PromptTokens)
	a.compl += int64(rec.CompletionTokens)
	if a.finish == nil {
		a.finish = map[string]int64{}
	}
	a.finish[rec.FinishReason]++
	a.records++
	if rec.Reasoning == "" {
		a.noReas++
	}
	if ThinkTags(rec.Content) {
		a.tags++
	}
}

func checkRecord(rec *Record) error {
	if rec.ID == "" {
		return errors.New("id: missing or empty")
	}
	if rec.Sample < 0 {
		return fmt.Errorf("sample: %d is negative", rec.Sample)
	}
	return nil
}

// commit counts a valid shard's records and indexes its keys; format is
// the one the file was read as.
func (r *Report) commit(path, format string, a *shardAcc) {
	if len(a.keys) == 0 {
		return
	}
	fi := int32(len(r.files))
	r.files = append(r.files, path)
	r.readAs = append(r.readAs, format)
	for _, k := range a.keys {
		r.addKey(fingerprintOf(k), &k, fi)
	}
	r.Records += int64(a.records)
	r.PromptTokens += a.prompt
	r.CompletionTokens += a.compl
	r.EmptyReasoning += a.noReas
	r.ThinkTags += a.tags
	for f, n := range a.finish {
		r.FinishReasons[f] += n
	}
}

// addKey indexes the key of fingerprint fp in file fi. k is the key when
// the caller has it (nil: Combine, for a key held once in its directory);
// a duplicate without it is named later by lookupNames.
func (r *Report) addKey(fp fingerprint, k *Key, fi int32) {
	if _, dup := r.keys[fp]; !dup {
		r.keys[fp] = fi
		return
	}
	d := r.extra[fp]
	if d == nil {
		d = &dupKey{}
		r.extra[fp] = d
	}
	if k != nil && !d.named {
		d.key, d.named = *k, true
	}
	d.more = append(d.more, fi)
}

// readShard reads one data file. With mayVanish, a file that is gone
// returns errVanished (a writer moved it on) instead of a problem.
func (r *Report) readShard(path, format string, temp, mayVanish bool, sh *ShardReport) error {
	if mayVanish {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return errVanished
		}
	}
	if read := formats[format].records; read != nil && !temp {
		return r.readConverted(path, format, sh, read)
	}
	return r.readJSONL(path, temp, mayVanish, sh)
}

// readJSONL reads a JSONL shard (final, .open or .journal). A final file
// must end in a newline; a temporary may end in a torn line that a writer is
// still appending, which is not read.
func (r *Report) readJSONL(path string, temp, mayVanish bool, sh *ShardReport) error {
	f, err := os.Open(path)
	if err != nil {
		if mayVanish && errors.Is(err, fs.ErrNotExist) {
			return errVanished
		}
		sh.State, sh.Problem = ShardInvalid, err.Error()
		r.problem("%s: %v", path, err)
		return nil
	}
	defer f.Close()
	acc := &shardAcc{}
	var bad []string
	badLines := 0
	complete, err := forEachLine(f, func(line []byte, n int) error {
		if temp && bytes.IndexByte(line, 0) >= 0 {
			// Where a power loss zero-filled the unsynced end: recovery
			// cuts from here (see recoverTail), so nothing from here on
			// is a record.
			return errZeroFill
		}
		var rec Record
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
		r.note("%s: ends in NUL bytes a power loss left; the next run cuts them", path)
	} else if err != nil {
		sh.State, sh.Problem = ShardInvalid, err.Error()
		r.problem("%s: read: %v", path, err)
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
		sh.State = ShardInvalid
		sh.Problem = strings.Join(bad, "; ")
		if badLines > len(bad) {
			sh.Problem += fmt.Sprintf(" (%d bad lines in all)", badLines)
		}
		if temp {
			r.problem("%s is corrupt: %s; the next run refuses it: move it away and rerun to regenerate its records", path, sh.Problem)
		} else {
			r.problem("%s is corrupt: %s; move it away (out of data/) and rerun with --force to regenerate its records", path, sh.Problem)
		}
		return nil
	}
	sh.Valid = true
	sh.State = ShardOK
	if temp {
		sh.State = ShardOpen
	}
	r.commit(path, FormatJSONL, acc)
	return nil
}

// inspectBatch is how many Parquet rows are decoded per read.
const inspectBatch = 64

// readConverted reads a final shard of a converted format (Parquet:
// through parquet-go's generic reader, the footer, the schema and every
// row).
func (r *Report) readConverted(path, format string, sh *ShardReport, read func(string) (*shardAcc, error)) error {
	acc, err := read(path)
	if err != nil {
		sh.State, sh.Problem = ShardInvalid, err.Error()
		if acc != nil {
			sh.Records = acc.records
		}
		r.problem("%s is corrupt: %v; move it away (out of data/) and rerun with --force to regenerate its records", path, err)
		return nil
	}
	sh.Records, sh.Valid, sh.State = acc.records, true, ShardOK
	r.commit(path, format, acc)
	return nil
}

var recordSchema = parquet.SchemaOf(Record{})

// addedColumns are the record's columns that shards written before them
// lack: they read as empty (a shard of a first-turn job has no turns).
var addedColumns = map[string]bool{"turns": true}

func readParquetRecords(path string) (acc *shardAcc, err error) {
	acc = &shardAcc{}
	err = eachParquetRecord(path, func(rec *Record) error {
		if err := checkRecord(rec); err != nil {
			return fmt.Errorf("row %d: %w", acc.records, err)
		}
		acc.add(rec)
		return nil
	})
	return acc, err
}

// readErrors reads DIR/errors (final and .open files).
func (r *Report) readErrors(errDir string) error {
	names, err := errorFiles(errDir)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", errDir, err)
	}
	for _, name := range names {
		path := filepath.Join(errDir, name)
		temp := strings.HasSuffix(name, suffixOpen)
		f, err := os.Open(path)
		if temp && errors.Is(err, fs.ErrNotExist) && !slices.Contains(names, strings.TrimSuffix(name, suffixOpen)) {
			// Renamed to its final name since the listing.
			path = strings.TrimSuffix(path, suffixOpen)
			f, err = os.Open(path)
		}
		if err != nil {
			if temp && errors.Is(err, fs.ErrNotExist) {
				return errVanished
			}
			r.problem("%s: %v", path, err)
			continue
		}
		var bad string
		_, err = forEachLine(f, func(line []byte, n int) error {
			var e ErrorRecord
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
			r.Errors.Records++
			r.failed[e.Key()] = e.Cause
			return nil
		})
		_ = f.Close()
		if err != nil {
			r.problem("%s: read: %v", path, err)
		}
		if bad != "" {
			r.problem("%s is corrupt: the next run refuses it; move it away (its keys are requested again)", bad)
		}
	}
	return nil
}
