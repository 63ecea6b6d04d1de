// Package tokenids is the mock server's tokenizer: the word pieces its
// answers are made of, the token ids it gives them and the prompt, and the
// logprobs it reports, written in vLLM's JSON shapes. It is apart from
// mockserver because none of it serves, schedules or fails a request: it
// is a pure function of the text and the request's token fields.
//
// The shapes are vLLM's (vLLM >= 0.10.2): with return_token_ids a plain
// answer carries prompt_token_ids at its top level and token_ids on its
// choice, a stream carries prompt_token_ids on its first (role) chunk and
// each token's id on its chunk's choice; with logprobs and top_logprobs
// K, each choice carries logprobs.content[], one entry per token with its
// logprob, bytes and K alternatives, named "token_id:N" with
// return_tokens_as_token_ids and by their text without.
//
// The ids are deterministic: a generated token's id is its vocabulary
// piece's (PieceID), so len(token_ids) == usage.completion_tokens and the
// ids spell the answer's text (Text); the prompt's are one a word of the
// messages (Prompt), as many as usage.prompt_tokens. A tool answer is not
// made of pieces: its tokens are its text's bytes, byte b's id byteBase+b
// (Bytes), so its ids spell its reasoning and then its call or its text,
// and a test tells a call's tokens by decoding them (Text). The logprobs
// are a pure function of the prompt and the token's place, so a retried
// request gets the same.
package tokenids

import (
	"iter"
	"slices"
)

// Vocabulary is the mock's tokenizer: every generated token is one of these
// word pieces. A few need JSON escaping (newline, tab, quote, backslash, <, &)
// or are multi-byte UTF-8, so clients' decoders are exercised on them.
var Vocabulary = [...]string{
	" the", " a", " of", " to", " and", " in", " is", " that", " for", " it",
	" we", " be", " as", " on", " with", " this", " by", " are", " or", " not",
	" so", " if", " then", " which", " can", " from", " at", " an", " but", " all",
	" model", " answer", " question", " step", " first", " next", " value", " number", " sum", " equal",
	" let", " me", " think", " check", " again", " wait", " okay", " right", " yes", " no",
	" compute", " result", " case", " example", " because", " therefore", " each", " two", " three", " one",
	" data", " set", " list", " function", " return", " true", " false", " input", " output", " test",
	" x", " y", " n", " k", " i", " =", " +", " -", " *", " /",
	"ing", "ed", "s", "ly", "er", "tion", "al", "ive", "ment", "ness",
	",", ".", ":", ";", "?", "!", "(", ")", " 0", " 1",
	" 2", " 3", " 42", " 100", " π", " café", " naïve", " ≤", " →", " ✓",
	"\n", "\n\n", "\t", " \"", "\"", " '", " \\", " <b>", " &", " `code`",
	" so", " the", " we", " is", " of", " a", " to", " and",
}

// pieceBase is the id of vocabulary piece 0: the ids stay clear of those
// real vocabularies give their first bytes and special tokens.
const pieceBase = 1000

// byteBase is the id of byte 0 of a tool answer's text: 256 ids below the
// pieces'.
const byteBase = 500

// Prompt ids are promptBase + a word's hash mod promptRange, clear of the
// pieces' ids.
const (
	promptBase  = 2000
	promptRange = 148000
)

// emptyPromptID is the one id of a prompt without words (whose usage
// counts one token).
const emptyPromptID = 151643

// PieceID is the id the mock generates for vocabulary piece i.
func PieceID(i int) int32 { return int32(pieceBase + i) }

// Text is the text of a generated token id, and whether the mock
// generates it: a vocabulary piece, or a tool answer's byte (one byte of
// a character of several).
func Text(id int32) (string, bool) {
	if b := int(id) - byteBase; b >= 0 && b < 256 {
		return string([]byte{byte(b)}), true
	}
	i := int(id) - pieceBase
	if i < 0 || i >= len(Vocabulary) {
		return "", false
	}
	return Vocabulary[i], true
}

// Prompt are the prompt ids the mock answers for messages of these
// contents, in order: one a word (as usage.prompt_tokens counts them),
// each the hash of its word.
func Prompt(contents ...string) []int32 { return prompt(slices.Values(contents)) }

func prompt(contents iter.Seq[string]) []int32 {
	var ids []int32
	for c := range contents {
		ids = appendWordIDs(ids, c)
	}
	if len(ids) == 0 {
		ids = append(ids, emptyPromptID)
	}
	return ids
}

// appendWordIDs appends one id per word of s (words split at ASCII white
// space, as the mock's usage counts them).
func appendWordIDs(ids []int32, s string) []int32 {
	start := -1
	for i := 0; i <= len(s); i++ {
		space := i == len(s) || s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		switch {
		case !space && start < 0:
			start = i
		case space && start >= 0:
			ids = append(ids, wordID(s[start:i]))
			start = -1
		}
	}
	return ids
}

// wordID is a prompt word's id, from the word's FNV-1a hash followed by a
// zero byte (as the mock hashes a prompt's texts), written out so that it
// allocates nothing.
func wordID(w string) int32 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := range len(w) {
		h = (h ^ uint64(w[i])) * prime
	}
	h *= prime // the zero byte: h ^= 0 is a no-op
	return int32(promptBase + h%promptRange)
}

// Bytes are the ids of s's bytes: a tool answer's tokens.
func Bytes(s string) []int32 {
	ids := make([]int32, len(s))
	for i := range len(s) {
		ids[i] = byteBase + int32(s[i])
	}
	return ids
}
