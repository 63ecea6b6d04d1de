package dataset

import (
	"bytes"
	"testing"
)

// BenchmarkDecodeObject is the per-row decode of a JSONL dataset, on a
// row of the bench's zero-latency scenario.
func BenchmarkDecodeObject(b *testing.B) {
	line := []byte(`{"prompt":"Question 7: what is the sum of the first 10 odd numbers?"}` + "\n")
	var rd bytes.Reader
	b.ReportAllocs()
	for b.Loop() {
		if _, bad := decodeObject(&rd, line); bad != nil {
			b.Fatal(bad)
		}
	}
}

func TestLocation(t *testing.T) {
	for _, c := range []struct {
		line, fileRow int64
		want          string
	}{{12, 11, "rows.jsonl:12"}, {0, 7, "rows.jsonl:row 7"}, {-1, 0, "rows.jsonl:row 0"}, {1 << 62, 0, "rows.jsonl:4611686018427387904"}} {
		if got := location("rows.jsonl", c.line, c.fileRow); got != c.want {
			t.Errorf("location(%d, %d) = %q, want %q", c.line, c.fileRow, got, c.want)
		}
	}
}

func BenchmarkLocation(b *testing.B) {
	b.ReportAllocs()
	for i := int64(0); b.Loop(); i++ {
		_ = location("/data/rows.jsonl", 1000+i, i)
	}
}
