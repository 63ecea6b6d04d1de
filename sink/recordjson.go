package sink

import (
	"math"
	"strconv"
	"time"

	"github.com/synthgen/synthgen/internal/jsonw"
)

// appendRecord appends r as one JSON line, byte for byte what
// json.Encoder with SetEscapeHTML(false) writes for it (field order, null
// for a nil Messages, turns left out when empty, encoding/json's string
// escapes and float format, created_at as time.Time's MarshalJSON), without
// reflection: the record line was about 2 us and 5 allocations of
// encoding/json per answer (ARCHITECTURE.md, "Measured decisions").
// TestAppendRecordMatchesEncodingJSON and FuzzAppendRecord hold it to
// encoding/json. ok is false for what this does not write the way
// encoding/json would (a float that is NaN or infinite, a time whose year
// has not four digits or whose zone is a day off or more: encoding/json fails on all); the caller then asks
// encoding/json, which gives its own error.
func appendRecord(b []byte, r *Record) (_ []byte, ok bool) {
	if !jsonFloat(r.LatencyMS) || !jsonFloat(r.TTFTMS) {
		return b, false
	}
	if y := r.CreatedAt.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := r.CreatedAt.Zone(); off <= -24*3600 || off >= 24*3600 {
		return b, false // MarshalJSON refuses a zone hour outside [0,23]
	}
	b = append(b, `{"id":`...)
	b = jsonw.AppendString(b, r.ID)
	b = append(b, `,"sample":`...)
	b = strconv.AppendInt(b, int64(r.Sample), 10)
	b = append(b, `,"source":`...)
	b = jsonw.AppendString(b, r.Source)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = jsonw.AppendString(b, r.Messages[i].Role)
			b = append(b, `,"content":`...)
			b = jsonw.AppendString(b, r.Messages[i].Content)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"reasoning":`...)
	b = jsonw.AppendString(b, r.Reasoning)
	b = append(b, `,"content":`...)
	b = jsonw.AppendString(b, r.Content)
	b = append(b, `,"finish_reason":`...)
	b = jsonw.AppendString(b, r.FinishReason)
	b = append(b, `,"model":`...)
	b = jsonw.AppendString(b, r.Model)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(r.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(r.CompletionTokens), 10)
	b = append(b, `,"latency_ms":`...)
	b = appendJSONFloat(b, r.LatencyMS)
	b = append(b, `,"ttft_ms":`...)
	b = appendJSONFloat(b, r.TTFTMS)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"created_at":"`...)
	b = r.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(r.Turns) > 0 {
		b = append(b, `,"turns":[`...)
		for i := range r.Turns {
			t := &r.Turns[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"reasoning":`...)
			b = jsonw.AppendString(b, t.Reasoning)
			b = append(b, `,"content":`...)
			b = jsonw.AppendString(b, t.Content)
			b = append(b, `,"finish_reason":`...)
			b = jsonw.AppendString(b, t.FinishReason)
			b = append(b, `,"prompt_tokens":`...)
			b = strconv.AppendInt(b, int64(t.PromptTokens), 10)
			b = append(b, `,"completion_tokens":`...)
			b = strconv.AppendInt(b, int64(t.CompletionTokens), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}', '\n'), true
}

func jsonFloat(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendJSONFloat is encoding/json's float64 encoding: the shortest
// representation, in exponent form below 1e-6 and from 1e21, with a
// two-digit exponent trimmed of its leading zero (1e-07 -> 1e-7).
func appendJSONFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
