package keyset

// Marks: a bit per key of a set that no longer changes, for one pass over
// a dataset to tell a key met twice (a repeated id) from a key met once,
// without a second set of the keys.

// Marks marks keys of a Set that no longer changes (what sink.Open
// recovered): about a bit a key, beside the set. A pass over the dataset
// visits each row's keys; a key visited twice belongs to two rows. The
// zero value and the Marks of a nil or empty set hold nothing. Marks are
// used by one goroutine; the set may be read by others meanwhile.
type Marks struct {
	set    *Set
	bits   [][]uint64 // by sample: a word per word of set.bits[sample]
	packed []uint64   // bit i: entry i of the packed store
	tail   map[Fingerprint]struct{}
}

// Marks returns the marks of s, none set. s must not change while they
// are used.
func (s *Set) Marks() *Marks { return &Marks{set: s} }

// Visit reports whether k is in the set and, when it is, whether it was
// visited before; it marks k visited.
func (m *Marks) Visit(k Key) (in, before bool) {
	s := m.set
	if s == nil || s.n == 0 {
		return false, false
	}
	if i, ok := decimalID(k.ID); ok && k.Sample >= 0 && k.Sample < len(s.bits) && s.bits[k.Sample].has(i) {
		b := &s.bits[k.Sample]
		for len(m.bits) <= k.Sample {
			m.bits = append(m.bits, nil)
		}
		if m.bits[k.Sample] == nil {
			m.bits[k.Sample] = make([]uint64, len(b.words))
		}
		return true, mark(m.bits[k.Sample], i/64-b.base, i%64)
	}
	if len(s.tail) == 0 && s.packed == nil {
		return false, false
	}
	f := FingerprintOf(k)
	if _, ok := s.tail[tailFP(f)]; ok {
		if m.tail == nil {
			m.tail = map[Fingerprint]struct{}{}
		}
		_, before = m.tail[tailFP(f)]
		m.tail[tailFP(f)] = struct{}{}
		return true, before
	}
	pos, ok := s.packed.find(f)
	if !ok {
		return false, false
	}
	if m.packed == nil {
		m.packed = make([]uint64, (s.packed.n+63)/64)
	}
	return true, mark(m.packed, uint64(pos/64), uint64(pos%64))
}

// mark sets bit b of words[w] and reports whether it was set.
func mark(words []uint64, w, b uint64) bool {
	had := words[w]&(1<<b) != 0
	words[w] |= 1 << b
	return had
}
