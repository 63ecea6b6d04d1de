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
