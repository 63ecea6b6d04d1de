// Package human writes figures for a person: digits grouped by thousands,
// a count with its noun, counts by name, a compact duration. It is the one
// place inspect's report, export's summary and the run's lines take them
// from.
package human

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Num groups digits by thousands: 1234567 -> 1,234,567.
func Num(n int64) string { return message.NewPrinter(language.English).Sprintf("%d", n) }

// Count is n with its noun: "1 record", "1,204 records".
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Num(n) + " " + many
}

// Counts lists counts by name, sorted by name: "http_400 2, timeout 1".
func Counts(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// Duration is a compact duration: 2h41m, 12m05s, 45s, 3d04h.
func Duration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 100*24*time.Hour:
		return ">99d"
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	default:
		return fmt.Sprintf("%ds", d/time.Second)
	}
}

// Dollars is an amount in USD for a person: $0 for nothing, whole
// dollars from $100, cents from a cent, and below a cent three
// significant digits ($0.000412), so that one small answer's cost never
// reads $0.0000.
func Dollars(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "$0"
	case a >= 100:
		return fmt.Sprintf("$%.0f", v)
	case a >= 0.01:
		return fmt.Sprintf("$%.2f", v)
	default:
		decimals := 2 - int(math.Floor(math.Log10(a)))
		return "$" + strconv.FormatFloat(v, 'f', decimals, 64)
	}
}
