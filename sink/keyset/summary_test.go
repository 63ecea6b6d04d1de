package keyset

import (
	"strconv"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Summary
			c.Add(Key{ID: "no"}) // reset forgets what came before
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
