package keyset

// The key summary of a part: when every id in a part is a row index (or a
// row number after a prefix, "NAME:ROW", as a dataset split by file has
// them), its sink.ShardInfo (in the part log line, then in manifest.json)
// lists its keys as one bitmap per prefix and sample, and a resume that
// finds the part as it was written
// (same size and modification time) takes its keys from there instead of
// reading the file. A part of 1,000 row-index records written in
// completion order costs about 180 bytes of base64: 1.8 MB in a manifest of
// 10,000 parts.
//
// Format (ShardInfo.Keys, JSON): [{"prefix":P,"sample":S,"first":F,"bits":B},
// ...] one entry per prefix and sample present, by prefix then sample (P
// omitted when empty, and ending in ":" when not); B is standard base64 (no
// padding) of a bitmap whose bit i (byte i/8, bit i%8, least significant
// first) says whether the key (P + decimal F+i, S) is in the part. Bit 0 is
// always set, and the last byte is never zero.

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// SampleKeys is the keys of one sample of a part whose ids are row
// indices (see the top of summary.go), or, with Prefix, row numbers after
// a prefix: ids "PREFIX" + decimal, as a dataset split by file makes them
// ("data/a.jsonl:" + row).
type SampleKeys struct {
	Prefix string `json:"prefix,omitempty"`
	Sample int    `json:"sample"`
	First  uint64 `json:"first"`
	Bits   string `json:"bits"`
}

// summaryMaxBytes bounds a summary's bitmaps at this many bytes per record:
// ids so sparse that a bitmap costs more (a shard of a --shard 1/64 job,
// say) are not summarized, and the part is read at resume.
const summaryMaxBytes = 4

var summaryEncoding = base64.RawStdEncoding

// maxPrefixes bounds the prefixes of one summary: a part spans a few
// files of a dataset split by file, not hundreds.
const maxPrefixes = 64

// Summary collects a part's keys while it is written (or read): a
// bitmap per prefix and sample (bitmap.go), a bit a key where a slice of ids
// cost 8 bytes (800 KB for a part of 100,000 records).
type Summary struct {
	groups []summaryGroup // by prefix, in the order first added
	last   int            // the group of the last key added
	none   bool           // an id that is neither form, or too sparse: no summary
}

// summaryGroup is the bitmaps of one prefix ("" for plain row indices),
// by sample.
type summaryGroup struct {
	prefix string
	bits   []bitmap
}

// splitPrefixed reads an id as a prefix and a canonical decimal row: a
// row index ("", i), or "NAME:ROW" (NAME + ":", ROW).
func splitPrefixed(id string) (prefix string, row uint64, ok bool) {
	if i, ok := decimalID(id); ok {
		return "", i, true
	}
	c := strings.LastIndexByte(id, ':')
	if c < 0 {
		return "", 0, false
	}
	i, ok := decimalID(id[c+1:])
	return id[:c+1], i, ok
}

// Add puts k in the summary; a key that is neither form, or too far from
// the others, leaves the summary with none to give.
func (c *Summary) Add(k Key) {
	if c.none {
		return
	}
	prefix, i, ok := splitPrefixed(k.ID)
	if !ok || k.Sample < 0 || k.Sample >= 1<<16 {
		c.none, c.groups = true, nil
		return
	}
	g := c.group(prefix)
	if g == nil {
		c.none, c.groups = true, nil
		return
	}
	for len(g.bits) <= k.Sample {
		g.bits = append(g.bits, bitmap{})
	}
	b := &g.bits[k.Sample]
	if !b.fits(i) {
		// Sparser than 64 bits a key: beyond summaryMaxBytes anyway.
		c.none, c.groups = true, nil
		return
	}
	b.set(i)
}

// group is prefix's group, made when new; nil past maxPrefixes.
func (c *Summary) group(prefix string) *summaryGroup {
	if c.last < len(c.groups) && c.groups[c.last].prefix == prefix {
		return &c.groups[c.last]
	}
	for i := range c.groups {
		if c.groups[i].prefix == prefix {
			c.last = i
			return &c.groups[i]
		}
	}
	if len(c.groups) >= maxPrefixes {
		return nil
	}
	c.groups = append(c.groups, summaryGroup{prefix: strings.Clone(prefix)})
	c.last = len(c.groups) - 1
	return &c.groups[c.last]
}

// Keys returns the sink.ShardInfo.Keys of what was added to a part of
// records records, by prefix then sample; nil when there is none to give
// (other ids, or too sparse: above summaryMaxBytes a record).
func (c *Summary) Keys(records int) []SampleKeys {
	if c.none {
		return nil
	}
	order := make([]int, 0, len(c.groups))
	for i := range c.groups {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(c.groups[a].prefix, c.groups[b].prefix) })
	var out []SampleKeys
	size := 0
	for _, gi := range order {
		g := &c.groups[gi]
		for s := range g.bits {
			bm := &g.bits[s]
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
			size += int((hi-lo)/8+1) + len(g.prefix)
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
			out = append(out, SampleKeys{Prefix: g.prefix, Sample: s, First: lo, Bits: summaryEncoding.EncodeToString(b)})
		}
	}
	return out
}

// Reset empties the summary for the next part, keeping the bitmaps'
// memory of the prefix the last key had.
func (c *Summary) Reset() {
	var keep []summaryGroup
	if c.last < len(c.groups) {
		g := c.groups[c.last]
		for i := range g.bits {
			g.bits[i] = bitmap{words: g.bits[i].words[:0]}
		}
		keep = append(keep, g)
	}
	c.groups = append(c.groups[:0], keep...)
	c.last, c.none = 0, false
}

// ForEachSummaryKey visits the keys a summary lists, by sample then id, and
// returns how many there were; an error names what is malformed.
func ForEachSummaryKey(keys []SampleKeys, visit func(k Key) error) (int, error) {
	n := 0
	var id []byte
	for j, sk := range keys {
		if sk.Sample < 0 || (j > 0 && cmp.Or(strings.Compare(sk.Prefix, keys[j-1].Prefix), cmp.Compare(sk.Sample, keys[j-1].Sample)) <= 0) {
			return n, fmt.Errorf("keys[%d]: sample %d out of order", j, sk.Sample)
		}
		if sk.Prefix != "" && !strings.HasSuffix(sk.Prefix, ":") {
			return n, fmt.Errorf("keys[%d]: prefix %q does not end in a colon", j, sk.Prefix)
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
				id = strconv.AppendUint(append(id[:0], sk.Prefix...), sk.First+uint64(w*8+t), 10)
				if err := visit(Key{ID: string(id), Sample: sk.Sample}); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}
