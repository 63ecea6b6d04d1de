package view

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"
)

// searchChunk is how many entries a search reads at a time.
const searchChunk = 256

// Match is a record whose text holds the searched words.
type Match struct {
	Row
	Field   string // where: "content", "reasoning", "turn 2 content", ...
	Snippet string // the text around the first occurrence
}

// Search reads the records q selects, in q's order, and calls fn for each
// whose content or reasoning (of any turn) holds q.Text, ignoring case, until
// limit matched, every record was read, or ctx ended. Every searchChunk
// records it calls progress with how many were read of how many. It
// returns how many were read.
func (ix *Index) Search(ctx context.Context, q Query, limit int, fn func(Match) error, progress func(read, total int) error) (int, error) {
	pos := ix.Select(q)
	needle := q.Text
	var keep func(line []byte) bool
	if rawMatchable(needle) {
		// The needle is in a JSONL line's bytes as typed: a line without
		// it is not decoded.
		keep = func(line []byte) bool { return indexFoldBytes(line, needle) >= 0 }
	}
	found, read := 0, 0
	for from := 0; from < len(pos) && found < limit; from += searchChunk {
		if err := ctx.Err(); err != nil {
			return read, err
		}
		rows, err := ix.rowsKeep(pos[from:min(from+searchChunk, len(pos))], keep)
		if err != nil {
			return read, err
		}
		for _, r := range rows {
			read++
			if r.Record == nil {
				continue
			}
			field, snip, ok := findIn(r, needle)
			if !ok {
				continue
			}
			if err := fn(Match{Row: r, Field: field, Snippet: snip}); err != nil {
				return read, err
			}
			if found++; found >= limit {
				break
			}
		}
		if progress != nil {
			if err := progress(read, len(pos)); err != nil {
				return read, err
			}
		}
	}
	return read, nil
}

// findIn looks for needle in r's content and reasoning, then each turn's.
func findIn(r Row, needle string) (field, snippet string, ok bool) {
	rec := r.Record
	try := func(name, text string) bool {
		if i := indexFold(text, needle); i >= 0 {
			field, snippet, ok = name, around(text, i, len(needle)), true
		}
		return ok
	}
	if try("content", rec.Content) || try("reasoning", rec.Reasoning) {
		return
	}
	for k, t := range rec.Turns {
		n := strconv.Itoa(k + 1)
		if try("turn "+n+" content", t.Content) || try("turn "+n+" reasoning", t.Reasoning) {
			return
		}
	}
	return "", "", false
}

// rawMatchable reports whether needle appears in the JSON of a text that
// holds it byte for byte, as encoding/json writes the record's line: ASCII
// without the characters it escapes (", \, <, >, & and control
// characters). Case folding of ASCII letters is the same on both sides.
func rawMatchable(needle string) bool {
	if needle == "" {
		return false
	}
	for i := 0; i < len(needle); i++ {
		c := needle[i]
		if c < 0x20 || c >= utf8.RuneSelf || strings.IndexByte(`"\<>&`, c) >= 0 {
			return false
		}
	}
	return true
}

// indexFoldBytes is indexFold over bytes, for an ASCII needle.
func indexFoldBytes(s []byte, needle string) int { return indexFoldASCII(s, needle) }

// indexFoldASCII is the byte index of the first occurrence of the ASCII
// needle in s, ignoring case, or -1: one loop for strings and bytes.
func indexFoldASCII[S ~string | ~[]byte](s S, needle string) int {
	first := lower(needle[0])
	for i := 0; i+len(needle) <= len(s); i++ {
		if lower(s[i]) != first {
			continue
		}
		j := 1
		for j < len(needle) && lower(s[i+j]) == lower(needle[j]) {
			j++
		}
		if j == len(needle) {
			return i
		}
	}
	return -1
}

// indexFold is the byte index of the first occurrence of needle in s,
// ignoring case (ASCII letters compared by hand, without a copy; other
// needles through strings.ToLower), or -1.
func indexFold(s, needle string) int {
	if needle == "" {
		return 0
	}
	ascii := true
	for i := 0; i < len(needle); i++ {
		if needle[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		ls, ln := strings.ToLower(s), strings.ToLower(needle)
		if i := strings.Index(ls, ln); i >= 0 && len(ls) == len(s) {
			return i
		} else if i >= 0 {
			return 0 // lower-casing changed the lengths: the snippet starts at the text's start
		}
		return -1
	}
	return indexFoldASCII(s, needle)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// snippetBytes is how much text a snippet shows on each side.
const snippetBytes = 90

// around is the text around s[i:i+n], cut at rune boundaries.
func around(s string, i, n int) string {
	from, to := max(i-snippetBytes, 0), min(i+n+snippetBytes, len(s))
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	out := s[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}
