package audit

// The key index: every key a directory's parts hold, with the file that
// holds it, sorted on disk (internal/extsort) rather than held in a map, so
// that an audit's memory does not grow with the records it reads. The
// totals that need every key (distinct keys, the keys held twice, the
// failed keys a record superseded) come from one pass over the sorted keys
// (scan); a plan of the job reads them again in order (EachKey); the
// audit of several directories merges theirs.

import (
	"encoding/binary"
	"errors"

	"github.com/synthgen/synthgen/internal/extsort"
	"github.com/synthgen/synthgen/sink"
)

// keyEntry is one copy of a key: the key and the index in the audit's files
// of the file that holds it.
type keyEntry struct {
	id     string
	sample int32
	file   int32
}

func (e keyEntry) key() sink.Key { return sink.Key{ID: e.id, Sample: int(e.sample)} }

var entryCodec = extsort.Codec[keyEntry]{
	Cmp: func(a, b keyEntry) int {
		if c := sink.CompareKeys(a.key(), b.key()); c != 0 {
			return c
		}
		return int(a.file) - int(b.file)
	},
	// The struct, the string's bytes, and the slice's share of growth.
	Size: func(e keyEntry) int { return 32 + len(e.id) + 8 },
	Append: func(buf []byte, e keyEntry) []byte {
		buf = binary.AppendUvarint(buf, uint64(e.sample))
		buf = binary.AppendUvarint(buf, uint64(e.file))
		return append(buf, e.id...)
	},
	Decode: func(b []byte) (keyEntry, error) {
		s, n := binary.Uvarint(b)
		if n <= 0 {
			return keyEntry{}, errBadEntry
		}
		f, m := binary.Uvarint(b[n:])
		if m <= 0 {
			return keyEntry{}, errBadEntry
		}
		return keyEntry{id: string(b[n+m:]), sample: int32(s), file: int32(f)}, nil
	},
}

var errBadEntry = errors.New("key entry does not decode")

// KeyBudget is the memory each directory's key index sorts in before it
// spills a run (the audit of a directory holds one at a time).
var KeyBudget = 16 << 20

// newKeySorter is a key index spilling into tmp ("": the system's
// temporary directory, TMPDIR).
func newKeySorter(tmp string) *extsort.Sorter[keyEntry] {
	return extsort.New(entryCodec, extsort.Options{Dir: tmp, Pattern: ".synthgen-inspect-*.keys", Budget: KeyBudget})
}

// failure is a key with an error record: the cause of its last one, and
// whether a record holds the key too (which supersedes it).
type failure struct {
	cause string
	held  bool
}

// entries returns every key copy the audit counted, in key order: a
// directory's from its index, several directories' merged, their files
// numbered as in Files.
func (a *Audit) entries() (*extsort.Iter[keyEntry], error) {
	if a.index != nil {
		return a.index.Sorted()
	}
	var its []*extsort.Iter[keyEntry]
	off := int32(0)
	for _, d := range a.of {
		it, err := d.entries()
		if err != nil {
			return nil, err
		}
		base := off
		its = append(its, extsort.Func(func() (keyEntry, bool, error) {
			e, ok := it.Next()
			e.file += base
			return e, ok, it.Err()
		}))
		off += int32(len(d.files))
	}
	return extsort.Merge(entryCodec.Cmp, its...), nil
}

// maxListed bounds the duplicates an audit lists one by one; the count of
// them all is DuplicateKeys, and the problems name every set of files
// sharing keys.
var maxListed = 1000

// scan reads the sorted keys once: the distinct keys, the keys held more
// than once (listed up to maxListed, each with its files), and which failed
// keys a record supersedes.
func (a *Audit) scan() error {
	it, err := a.entries()
	if err != nil {
		return err
	}
	g := newDupGroups(a.of != nil)
	var (
		cur   keyEntry
		files []string
		have  bool
	)
	flush := func() {
		if !have {
			return
		}
		a.Distinct++
		if f, ok := a.failed[cur.key()]; ok {
			f.held = true
			a.failed[cur.key()] = f
		}
		if len(files) > 1 {
			d := Duplicate{ID: cur.id, Sample: int(cur.sample), Files: files}
			a.DuplicateKeys++
			g.add(d)
			if len(a.Duplicates) < maxListed {
				a.Duplicates = append(a.Duplicates, d)
			}
		}
	}
	for {
		e, ok := it.Next()
		if !ok {
			break
		}
		if have && e.id == cur.id && e.sample == cur.sample {
			files = append(files, a.files[e.file])
			continue
		}
		flush()
		cur, have = e, true
		files = []string{a.files[e.file]}
	}
	if err := it.Err(); err != nil {
		return err
	}
	flush()
	a.dups = g
	return nil
}

// EachKey calls yield with each distinct key that has a readable record,
// in sink.CompareKeys order, read from the audit's sorted index, until
// yield returns false. It may be called any number of times while the
// audit is open; the error is a spilled run that does not read.
func (a *Audit) EachKey(yield func(k sink.Key) bool) error {
	it, err := a.entries()
	if err != nil {
		return err
	}
	var last keyEntry
	have := false
	for {
		e, ok := it.Next()
		if !ok {
			return it.Err()
		}
		if have && e.id == last.id && e.sample == last.sample {
			continue
		}
		last, have = e, true
		if !yield(e.key()) {
			return nil
		}
	}
}

// Close removes the audit's key index from the temporary directory (on
// Unix it holds no name there anyway: its file is unlinked when created).
// SortedKeys ends with it.
func (a *Audit) Close() error {
	if a.index == nil {
		return nil
	}
	err := a.index.Close()
	a.index = nil
	return err
}

// closeIndex is Close for an audit thrown away.
func closeIndex(a *Audit) {
	if a != nil {
		_ = a.Close()
	}
}
