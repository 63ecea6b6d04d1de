package config

import "strings"

// nearestKey returns the known key or section closest to an unknown dotted
// key, or "" when none is close enough to be a plausible typo. Two distances
// are tried: the whole dotted name (catches "generation.temprature") and the
// last part alone (catches a key put in the wrong section, "max_tokens" at
// the top level for "generation.max_tokens"). Closeness is judged against
// the last part's length, since the section prefix is not what was mistyped.
func nearestKey(unknown string) string {
	return Nearest(unknown, append(Keys(), sectionNames...))
}

// Nearest returns the candidate closest to unknown by the rule nearestKey
// describes (names may be dotted or not), or "" when none is close enough
// to be a plausible typo. A tie goes to the earlier candidate. cmd uses it
// for flags; nearestEnv for environment variables.
func Nearest(unknown string, candidates []string) string {
	last := lastPart(unknown)
	best, bestScore, bestWhole := "", -1, 0
	consider := func(cand string) {
		candLast := lastPart(cand)
		whole := levenshtein(unknown, cand)
		part := levenshtein(last, candLast)
		// One name inside the other ("url" in "base_url", "backoff" in
		// "max_backoff") is as good as one typo.
		if part > 1 && min(len(last), len(candLast)) >= 3 &&
			(strings.Contains(candLast, last) || strings.Contains(last, candLast)) {
			part = 1
		}
		score := min(whole, part)
		// The typed last part must survive in part, and be a few edits away
		// at most, proportionally more for long names.
		if score >= len(last) || score > max(2, len(last)/3) {
			return
		}
		if bestScore < 0 || score < bestScore || (score == bestScore && whole < bestWhole) {
			best, bestScore, bestWhole = cand, score, whole
		}
	}
	for _, c := range candidates {
		consider(c)
	}
	return best
}

func lastPart(k string) string {
	return k[strings.LastIndexByte(k, '.')+1:]
}

// levenshtein is the edit distance between a and b, over bytes (keys are
// ASCII; a non-ASCII typo just scores as further away).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
