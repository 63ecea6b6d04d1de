package progress

import (
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/generator/autoconc"
)

// AutoText is the plain line's field: " | concurrency 98 (back off: KV cache 99% full)".
func AutoText(rec *autoconc.Record) string {
	return fmt.Sprintf(" | concurrency %d (%s)", rec.Limit, rec.Reason)
}

// AutoBar is the bar's short field: "limit 98 back off".
func AutoBar(rec *autoconc.Record) string {
	verb, _, _ := strings.Cut(rec.Reason, ":")
	return fmt.Sprintf("limit %d %s", rec.Limit, verb)
}
