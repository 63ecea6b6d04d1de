package keyset

import (
	"strconv"
	"strings"
	"testing"
)

// secondHalfKeys are keys far from row 0, in descending order over several
// bitmap words and two samples (the bitmap grows down).
func secondHalfKeys() []Key {
	var keys []Key
	for i := 500_300; i >= 500_000; i -= 7 {
		keys = append(keys, Key{ID: strconv.Itoa(i), Sample: i % 2})
	}
	return keys
}

// A summary lists exactly the keys added, and round-trips through its
// encoding; ids that are not row indices, or too sparse, give none.
func TestKeySummaryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []Key
		none bool
	}{
		{"one", []Key{{ID: "0"}}, false},
		{"completion order, two samples", []Key{{ID: "17", Sample: 1}, {ID: "3"}, {ID: "9"}, {ID: "4", Sample: 1}, {ID: "200"}}, false},
		{"sample without keys between", []Key{{ID: "5", Sample: 2}, {ID: "6"}}, false},
		{"string id", []Key{{ID: "5"}, {ID: "q-1"}}, true},
		{"leading zero", []Key{{ID: "05"}}, true},
		{"too sparse", []Key{{ID: "1"}, {ID: "100000"}}, true},
		{"second half, descending across words", secondHalfKeys(), false},
		{"split by file, a part across two files", []Key{{ID: "part-001.jsonl:99998"}, {ID: "part-002.jsonl:1"}, {ID: "part-001.jsonl:99999"},
			{ID: "part-002.jsonl:0", Sample: 1}, {ID: "7"}}, false},
		{"file row with a leading zero", []Key{{ID: "a.jsonl:01"}}, true},
		{"file name alone", []Key{{ID: "a.jsonl:"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Summary
			c.Add(Key{ID: "x.jsonl:3"})
			c.Reset() // forgets what came before
			c.Add(Key{ID: "no"})
			c.Reset()
			for _, k := range tc.keys {
				c.Add(k)
			}
			sum := c.Keys(len(tc.keys))
			if tc.none {
				if sum != nil {
					t.Fatalf("summary %+v, want none", sum)
				}
				return
			}
			got := map[Key]bool{}
			n, err := ForEachSummaryKey(sum, func(k Key) error {
				if got[k] {
					t.Errorf("%v listed twice", k)
				}
				got[k] = true
				return nil
			})
			if err != nil || n != len(tc.keys) {
				t.Fatalf("%d keys, %v; want %d", n, err, len(tc.keys))
			}
			for _, k := range tc.keys {
				if !got[k] {
					t.Errorf("%v missing from %+v", k, sum)
				}
			}
		})
	}
	for _, bad := range [][]SampleKeys{
		{{Sample: 0, First: 0, Bits: "!!"}},
		{{Sample: 0, First: 0, Bits: "AA"}},                          // no key at all
		{{Sample: 0, First: 0, Bits: "AQ"}, {Sample: 0, Bits: "AQ"}}, // a sample twice
		{{Sample: 0, First: 0, Bits: "AQA"}},                         // a trailing zero byte
	} {
		if _, err := ForEachSummaryKey(bad, func(Key) error { return nil }); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestSummaryPrefixesOrdered: entries come by prefix then sample, and an
// entry out of that order, or a prefix without its colon, does not read.
func TestSummaryPrefixesOrdered(t *testing.T) {
	var c Summary
	for _, k := range []Key{{ID: "b:1"}, {ID: "a:2", Sample: 1}, {ID: "a:3"}, {ID: "5"}} {
		c.Add(k)
	}
	sum := c.Keys(4)
	var order []string
	for _, sk := range sum {
		order = append(order, sk.Prefix+"/"+strconv.Itoa(sk.Sample))
	}
	if got := strings.Join(order, " "); got != "/0 a:/0 a:/1 b:/0" {
		t.Errorf("entries %s, want by prefix then sample", got)
	}
	swapped := append([]SampleKeys{sum[1]}, append([]SampleKeys{sum[0]}, sum[2:]...)...)
	if _, err := ForEachSummaryKey(swapped, func(Key) error { return nil }); err == nil {
		t.Error("entries out of order read")
	}
	bad := []SampleKeys{{Prefix: "a", Sample: 0, First: 1, Bits: sum[1].Bits}}
	if _, err := ForEachSummaryKey(bad, func(Key) error { return nil }); err == nil {
		t.Error("a prefix without its colon read")
	}
}
