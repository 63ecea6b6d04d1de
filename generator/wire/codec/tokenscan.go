package codec

import (
	"math"
	"strconv"

	"github.com/synthgen/synthgen/internal/jsonlex"
)

// The chunk scanner's reading of token ids and logprobs (scan.go),
// held to the reference's logprobsJSON and []int32 fields like the rest:
// whatever it cannot vouch for (a number that is no int32 or float32, a
// duplicate key, an alternative named by text or with an escape) goes to
// the reference. Every value is appended to the scanner's TokenBuf, so a
// stream's chunks allocate nothing for them once the buffer has grown.

// int32s appends a JSON array of int32 to *dst, as encoding/json fills a
// []int32: null is no list, a null element is 0; a number that is no
// integer or out of int32's range is the reference's.
func (s *chunkScanner) int32s(dst *[]int32) bool {
	if s.null() {
		return true
	}
	s.tb.used = true
	if !s.Consume('[') {
		return false
	}
	if s.Consume(']') {
		return true
	}
	for {
		s.WS()
		n, ok := s.intOrNull()
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return false
		}
		*dst = append(*dst, int32(n))
		if s.Consume(']') {
			return true
		}
		if !s.Consume(',') {
			return false
		}
	}
}

// float32OrNull reads what a float32 field accepts: null (0) or a number
// that fits, parsed as encoding/json parses it (strconv.ParseFloat at 32
// bits); one out of range is the reference's to refuse.
func (s *chunkScanner) float32OrNull() (float32, bool) {
	if s.null() {
		return 0, true
	}
	start := s.I
	if !s.Number() {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(s.B[start:s.I]), 32)
	if err != nil {
		return 0, false
	}
	return float32(f), true
}

// logprobs reads a choice's logprobs: null, or an object whose content
// lists one entry per token.
func (s *chunkScanner) logprobs() bool {
	if s.null() {
		return true
	}
	s.tb.used = true
	if !s.Consume('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return false
		}
		if done {
			return true
		}
		bit := uint8(0)
		switch string(key.b) {
		case "content":
			bit = 1 << 0
			ok = s.logprobEntries()
		default:
			ok = s.unknown(key, logprobsKeys)
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// logprobEntries reads logprobs.content: null, or an array of entries (a
// null entry is a token of logprob 0 without alternatives, as the
// reference's zero struct).
func (s *chunkScanner) logprobEntries() bool {
	if s.null() {
		return true
	}
	if !s.Consume('[') {
		return false
	}
	if s.Consume(']') {
		return true
	}
	tb := s.tb
	for {
		s.WS()
		if s.null() {
			tb.lp = append(tb.lp, 0)
			tb.topN = append(tb.topN, 0)
		} else if !s.logprobEntry() {
			return false
		}
		if s.Consume(']') {
			return true
		}
		if !s.Consume(',') {
			return false
		}
	}
}

// logprobEntry reads one token's entry: its logprob and its alternatives
// (its token and bytes are skipped: token_ids name the token).
func (s *chunkScanner) logprobEntry() bool {
	if !s.Consume('{') {
		return false
	}
	tb := s.tb
	var (
		lp   float32
		n    int32
		seen uint8
	)
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return false
		}
		if done {
			tb.lp = append(tb.lp, lp)
			tb.topN = append(tb.topN, n)
			return true
		}
		bit := uint8(0)
		switch string(key.b) {
		case "logprob":
			bit = 1 << 0
			lp, ok = s.float32OrNull()
		case "top_logprobs":
			bit = 1 << 1
			n, ok = s.alternatives()
		case "token", "bytes": // not read (token_ids name the token): skipped as the reference ignores them
			ok = s.skipBytes()
		default:
			ok = s.unknown(key, logprobKeys)
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// alternatives reads an entry's top_logprobs, appending each one's id and
// logprob, and returns how many. Only alternatives named by id
// ("token_id:N", as vLLM names them when asked) are read here; one named
// by its text, or null, is the reference's.
func (s *chunkScanner) alternatives() (int32, bool) {
	if s.null() {
		return 0, true
	}
	if !s.Consume('[') {
		return 0, false
	}
	if s.Consume(']') {
		return 0, true
	}
	tb := s.tb
	var n int32
	for {
		s.WS()
		id, lp, ok := s.alternative()
		if !ok {
			return 0, false
		}
		tb.topIDs = append(tb.topIDs, id)
		tb.topLP = append(tb.topLP, lp)
		n++
		if s.Consume(']') {
			return n, true
		}
		if !s.Consume(',') {
			return 0, false
		}
	}
}

func (s *chunkScanner) alternative() (id int32, lp float32, ok bool) {
	if !s.Consume('{') {
		return 0, 0, false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := s.member(first)
		if !ok {
			return 0, 0, false
		}
		if done {
			// Without a token, its text is "": the reference's.
			return id, lp, seen&(1<<0) != 0
		}
		bit := uint8(0)
		switch string(key.b) {
		case "token":
			bit = 1 << 0
			var sp jsonlex.Span
			if sp, ok = s.Str(); ok && !sp.Esc {
				id, ok = ParseTokenID(string(s.B[sp.Lo:sp.Hi]))
			} else {
				ok = false
			}
		case "logprob":
			bit = 1 << 1
			lp, ok = s.float32OrNull()
		case "bytes":
			ok = s.skipBytes()
		default:
			ok = s.unknown(key, alternativeKeys)
		}
		if !ok || seen&bit != 0 {
			return 0, 0, false
		}
		seen |= bit
	}
}

// skipBytes skips a value the reference ignores, quickly when it is what
// vLLM sends under "bytes": a list of small non-negative integers (a
// token's UTF-8). Anything else is skipped as any value is, and validated
// the same way.
func (s *chunkScanner) skipBytes() bool {
	b, i := s.B, s.I
	if i < len(b) && b[i] == '[' {
		i++
		if i < len(b) && b[i] == ']' {
			s.I = i + 1
			return true
		}
		for {
			j := i
			for i < len(b) && '0' <= b[i] && b[i] <= '9' {
				i++
			}
			if i == j || i-j > 1 && b[j] == '0' || i >= len(b) {
				break // not a plain integer: skipValue decides
			}
			if b[i] == ']' {
				s.I = i + 1
				return true
			}
			if b[i] != ',' {
				break
			}
			i++
		}
	}
	return s.SkipValue()
}
