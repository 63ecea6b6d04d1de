package sink

// The record's tokens: with generation.return_token_ids, the ids of the
// prompt as the server tokenized it (its chat template applied) and of the
// answer as it generated them, under vLLM's names (prompt_token_ids,
// token_ids); with generation.logprobs K, each generated token's logprob
// and its K most likely alternatives. They are what a drafter trains on
// without re-tokenizing the text, so they are kept as the server sent
// them: int32 lists (LIST of INT32 in Parquet), logprobs as float32.
//
// Where the server reports usage, len(token_ids) is checked against
// usage.completion_tokens and len(prompt_token_ids) against
// usage.prompt_tokens, and the logprobs' count against the ids';
// token_ids_mismatch says what disagreed ("" when all agree).

// Logprobs are an answer's logprobs as parallel lists, one entry per
// generated token (the i-th of token_ids), rather than an object per
// token: a token at K alternatives costs 4 + 8K bytes in memory and in
// Parquet before compression, and no key names repeated in JSONL.
//
// TokenLogprobs[i] is the logprob of token i; TopLogprobs[i] are the
// logprobs of its alternatives, most likely first (vLLM's top_logprobs),
// and TopIDs[i] their ids. A server that names the alternatives by their
// text rather than by id (one that ignores vLLM's
// return_tokens_as_token_ids) fills TopTokens[i] with the texts instead,
// and TopIDs stays empty.
type Logprobs struct {
	TokenLogprobs []float32   `json:"token_logprobs" parquet:"token_logprobs,list"`
	TopIDs        [][]int32   `json:"top_ids,omitempty" parquet:"top_ids,list"`
	TopTokens     [][]string  `json:"top_tokens,omitempty" parquet:"top_tokens,list"`
	TopLogprobs   [][]float32 `json:"top_logprobs" parquet:"top_logprobs,list"`
}

// emptyTokensNil makes the token lists a Parquet row read back empty nil,
// as the same record's JSONL line reads (JSON omits them): a reader sees
// one record whichever format held it.
func (r *Record) emptyTokensNil() {
	if len(r.PromptTokenIDs) == 0 {
		r.PromptTokenIDs = nil
	}
	if len(r.TokenIDs) == 0 {
		r.TokenIDs = nil
	}
	for i := range r.Turns {
		t := &r.Turns[i]
		if len(t.PromptTokenIDs) == 0 {
			t.PromptTokenIDs = nil
		}
		if len(t.TokenIDs) == 0 {
			t.TokenIDs = nil
		}
		t.Logprobs.emptyNil()
	}
	r.Logprobs.emptyNil()
}

func (l *Logprobs) emptyNil() {
	if l == nil {
		return
	}
	if len(l.TokenLogprobs) == 0 {
		l.TokenLogprobs = nil
	}
	if len(l.TopIDs) == 0 {
		l.TopIDs = nil
	}
	if len(l.TopTokens) == 0 {
		l.TopTokens = nil
	}
	if len(l.TopLogprobs) == 0 {
		l.TopLogprobs = nil
	}
}
