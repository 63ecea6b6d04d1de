// Package number writes a decoded row's numbers (JSON numbers as
// json.Number, Parquet's integer and float columns) in plain decimal: how a
// row's id and a template's text print them.
package number

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Decimal formats a numeric value in decimal without an exponent.
func Decimal(v any) (string, bool) {
	switch n := v.(type) {
	case json.Number:
		s := string(n)
		if !strings.ContainsAny(s, ".eE") {
			return s, true // integers stay exact, however long
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return s, true
		}
		return strconv.FormatFloat(f, 'f', -1, 64), true
	case int64:
		return strconv.FormatInt(n, 10), true
	case int32:
		return strconv.FormatInt(int64(n), 10), true
	case int:
		return strconv.Itoa(n), true
	case uint64:
		return strconv.FormatUint(n, 10), true
	case uint32:
		return strconv.FormatUint(uint64(n), 10), true
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(n), 'f', -1, 32), true
	}
	return "", false
}
