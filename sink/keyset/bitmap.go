package keyset

// maxBitID bounds the ids a bitmap holds: 2^40 rows is beyond any dataset.
const maxBitID = 1 << 40

// decimalID reads a canonical decimal id (a row index as the dataset writes
// it): digits, no sign, no leading zero, below maxBitID.
func decimalID(id string) (uint64, bool) {
	if id == "" || len(id) > 13 || (id[0] == '0' && len(id) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n < maxBitID
}

// bitmap is the rows of one sample whose key is in the set. It covers the
// words from base on, not from row 0: a run that completes a job from 50%
// writes (and asks) only the rows of the second half, and its bitmap must
// not have to reach back to row 0 to hold them (it would be too sparse, and
// every key would become a fingerprint of 12 bytes).
type bitmap struct {
	base  uint64 // index of the word words[0] is
	words []uint64
	n     int // bits set
}

func (b *bitmap) has(i uint64) bool {
	w := i / 64
	return w >= b.base && w-b.base < uint64(len(b.words)) && b.words[w-b.base]&(1<<(i%64)) != 0
}

// maxWords is how many words the bitmap may cover: 64 bits per key it
// holds, plus 2^16 bits.
func (b *bitmap) maxWords() uint64 { return uint64(b.n+1) + 1024 }

// fits says whether bit i may be set without the bitmap growing past 64
// bits per key it holds (plus 2^16 bits).
func (b *bitmap) fits(i uint64) bool {
	w := i / 64
	if len(b.words) == 0 {
		return true
	}
	end := b.base + uint64(len(b.words))
	return max(end, w+1)-min(b.base, w) <= b.maxWords()
}

// set sets bit i (fits(i) must hold, or the caller bounds i otherwise) and
// reports whether it was set before.
func (b *bitmap) set(i uint64) bool {
	w := i / 64
	if len(b.words) == 0 {
		b.base = w
	}
	if w < b.base {
		// Grow down by half again (ids read in descending order cost
		// amortized constant time), within the density bound and row 0.
		grow := b.base - w
		if room := b.maxWords(); room > uint64(len(b.words))+grow {
			grow = max(grow, min(uint64(len(b.words))/2, room-uint64(len(b.words))))
		}
		grow = min(grow, b.base)
		words := make([]uint64, uint64(len(b.words))+grow)
		copy(words[grow:], b.words)
		b.words, b.base = words, b.base-grow
	}
	d := int(w - b.base)
	if d >= len(b.words) {
		// Grow by half again, so that ids read in order cost amortized
		// constant time, within the density bound fits checks.
		n := max(d+1, min(len(b.words)+len(b.words)/2, b.n+1025))
		b.words = append(b.words, make([]uint64, n-len(b.words))...)
	}
	m := uint64(1) << (i % 64)
	if b.words[d]&m != 0 {
		return true
	}
	b.words[d] |= m
	b.n++
	return false
}
