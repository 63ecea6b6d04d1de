package judge

import "testing"

// TestDollars: a record's cost under a hundredth of a cent keeps two
// significant digits instead of reading $0.0000.
func TestDollars(t *testing.T) {
	for v, want := range map[float64]string{0: "$0.0000", 0.0000136: "$0.000014", 0.00012: "$0.0001", 0.5: "$0.5000", 3.1: "$3.10"} {
		if got := dollars(v); got != want {
			t.Errorf("dollars(%v) = %q, want %q", v, got, want)
		}
	}
}
