package keyset

// The key summary of a part: when every id in a part is a row index, its
// sink.ShardInfo (in the part log line, then in manifest.json) lists its
// keys as one bitmap per sample, and a resume that finds the part as it was written
// (same size and modification time) takes its keys from there instead of
// reading the file. A part of 1,000 row-index records written in
// completion order costs about 180 bytes of base64: 1.8 MB in a manifest of
// 10,000 parts.
//
// Format (ShardInfo.Keys, JSON): [{"sample":S,"first":F,"bits":B}, ...] one
// entry per sample present, by sample; B is standard base64 (no padding) of
// a bitmap whose bit i (byte i/8, bit i%8, least significant first) says
// whether the key (F+i, S) is in the part. Bit 0 is always set, and the
// last byte is never zero.

import (
	"encoding/base64"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
)

// SampleKeys is the keys of one sample of a part whose ids are row
// indices (see the top of summary.go).
type SampleKeys struct {
	Sample int    `json:"sample"`
	First  uint64 `json:"first"`
	Bits   string `json:"bits"`
}

// summaryMaxBytes bounds a summary's bitmaps at this many bytes per record:
// ids so sparse that a bitmap costs more (a shard of a --shard 1/64 job,
// say) are not summarized, and the part is read at resume.
const summaryMaxBytes = 4

var summaryEncoding = base64.RawStdEncoding

// Summary collects a part's keys while it is written (or read): a
// bitmap per sample (bitmap.go), a bit a key where a slice of ids cost 8
// bytes (800 KB for a part of 100,000 records).
type Summary struct {
	bits []bitmap // by sample
	none bool     // an id that is not a row index, or too sparse: no summary
}

// Add puts k in the summary; a key that is not a row index, or too far
// from the others, leaves the summary with none to give.
func (c *Summary) Add(k Key) {
	if c.none {
		return
	}
	i, ok := decimalID(k.ID)
	if !ok || k.Sample < 0 || k.Sample >= 1<<16 {
		c.none, c.bits = true, nil
		return
	}
	for len(c.bits) <= k.Sample {
		c.bits = append(c.bits, bitmap{})
	}
	b := &c.bits[k.Sample]
	if !b.fits(i) {
		// Sparser than 64 bits a key: beyond summaryMaxBytes anyway.
		c.none, c.bits = true, nil
		return
	}
	b.set(i)
}

// Keys returns the sink.ShardInfo.Keys of what was added to a part of
// records records, nil when there is none to give (other ids, or too
// sparse: above summaryMaxBytes a record).
func (c *Summary) Keys(records int) []SampleKeys {
	if c.none {
		return nil
	}
	var out []SampleKeys
	size := 0
	for s := range c.bits {
		bm := &c.bits[s]
		if bm.n == 0 {
			continue
		}
		first := slices.IndexFunc(bm.words, func(w uint64) bool { return w != 0 })
		last := len(bm.words) - 1
		for bm.words[last] == 0 {
			last--
		}
		lo := (bm.base+uint64(first))*64 + uint64(bits.TrailingZeros64(bm.words[first]))
		hi := (bm.base+uint64(last))*64 + 63 - uint64(bits.LeadingZeros64(bm.words[last]))
		size += int((hi-lo)/8 + 1)
		if size > summaryMaxBytes*records+64 {
			return nil
		}
		b := make([]byte, (hi-lo)/8+1)
		for w := first; w <= last; w++ {
			for x := bm.words[w]; x != 0; x &= x - 1 {
				d := (bm.base+uint64(w))*64 + uint64(bits.TrailingZeros64(x)) - lo
				b[d/8] |= 1 << (d % 8)
			}
		}
		out = append(out, SampleKeys{Sample: s, First: lo, Bits: summaryEncoding.EncodeToString(b)})
	}
	return out
}

// Reset empties the summary for the next part, keeping its bitmaps' memory.
func (c *Summary) Reset() {
	for i := range c.bits {
		c.bits[i] = bitmap{words: c.bits[i].words[:0]}
	}
	c.none = false
}

// ForEachSummaryKey visits the keys a summary lists, by sample then id, and
// returns how many there were; an error names what is malformed.
func ForEachSummaryKey(keys []SampleKeys, visit func(k Key) error) (int, error) {
	n := 0
	var id []byte
	for j, sk := range keys {
		if sk.Sample < 0 || (j > 0 && sk.Sample <= keys[j-1].Sample) {
			return n, fmt.Errorf("keys[%d]: sample %d out of order", j, sk.Sample)
		}
		b, err := summaryEncoding.DecodeString(sk.Bits)
		if err != nil {
			return n, fmt.Errorf("keys[%d]: bits: %w", j, err)
		}
		if len(b) == 0 || b[0]&1 == 0 || b[len(b)-1] == 0 || sk.First+uint64(len(b))*8 >= maxBitID {
			return n, fmt.Errorf("keys[%d]: bits do not start and end with a key", j)
		}
		for w, c := range b {
			for c != 0 {
				t := bits.TrailingZeros8(c)
				c &= c - 1
				id = strconv.AppendUint(id[:0], sk.First+uint64(w*8+t), 10)
				if err := visit(Key{ID: string(id), Sample: sk.Sample}); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}
