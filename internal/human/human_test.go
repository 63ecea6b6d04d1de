package human

import (
	"testing"
	"time"
)

func TestFigures(t *testing.T) {
	t.Parallel()
	for got, want := range map[string]string{
		Num(1234567):                             "1,234,567",
		Count(1, "record", "records"):            "1 record",
		Count(1204, "record", "records"):         "1,204 records",
		Counts(map[string]int64{"b": 1, "a": 2}): "a 2, b 1",
		Duration(45 * time.Second):               "45s",
		Duration(12*time.Minute + 5*time.Second): "12m05s",
		Duration(2*time.Hour + 41*time.Minute):   "2h41m",
		Duration(76 * time.Hour):                 "3d04h",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {45 * time.Second, "45s"}, {12*time.Minute + 5*time.Second, "12m05s"},
		{2*time.Hour + 41*time.Minute + 10*time.Second, "2h41m"}, {76 * time.Hour, "3d04h"},
		{200 * 24 * time.Hour, ">99d"},
	}
	for _, tc := range tests {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// A cost below a cent keeps three significant digits: one answer's
// $0.0000412 is not $0.0000 (issue 41).
func TestDollars(t *testing.T) {
	for v, want := range map[float64]string{
		0: "$0", 0.0000412: "$0.0000412", 0.00049: "$0.000490", 0.0093: "$0.00930", 0.01: "$0.01",
		0.4912: "$0.49", 12.345: "$12.35", 1234.5: "$1234", 1e-7: "$0.000000100",
	} {
		if got := Dollars(v); got != want {
			t.Errorf("Dollars(%v) = %q, want %q", v, got, want)
		}
	}
}
