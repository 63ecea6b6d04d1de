package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/sink"
)

// TestTokenIDsCheck: the check decides once: at the first answer that
// carries ids (any turn's counts), or after want answers without any (or at
// the end, when fewer came).
func TestTokenIDsCheck(t *testing.T) {
	none := &sink.Record{Content: "4"}
	ids := &sink.Record{Content: "4", TokenIDs: []int32{19}}
	promptOnly := &sink.Record{PromptTokenIDs: []int32{1, 2}}
	inTurn := &sink.Record{Turns: []sink.Turn{{}, {TokenIDs: []int32{3}}}}
	tests := []struct {
		name  string
		want  int
		recs  []*sink.Record
		found bool
	}{
		{"ids", 3, []*sink.Record{ids, none, none, none}, false},
		{"late ids settle it too", 3, []*sink.Record{none, none, ids}, false},
		{"prompt ids alone", 3, []*sink.Record{promptOnly, none, none}, false},
		{"an earlier turn's ids", 3, []*sink.Record{inTurn, none, none}, false},
		{"none", 3, []*sink.Record{none, none, none, ids}, true},
		{"fewer answers than wanted: decided at the end", 20, []*sink.Record{none, none}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tokenIDsCheck{want: tt.want}
			var got []*NoTokenIDsError
			for _, r := range tt.recs {
				if e := c.observe(r); e != nil {
					got = append(got, e)
				}
			}
			if e := c.end(); e != nil {
				got = append(got, e)
			}
			for range 5 {
				if e := c.observe(none); e != nil {
					got = append(got, e)
				}
			}
			if (len(got) == 1) != tt.found || len(got) > 1 {
				t.Errorf("found %d times %v, want found=%v once", len(got), got, tt.found)
			}
			if len(got) == 1 && got[0].Checked != min(tt.want, len(tt.recs)) {
				t.Errorf("checked %d", got[0].Checked)
			}
		})
	}
	var nilCheck *tokenIDsCheck // no ids asked: no check
	if nilCheck.observe(none) != nil || nilCheck.end() != nil {
		t.Error("a nil check found something")
	}
}

// idTalker answers as talker does, with ids: the prompt's one a message
// (its length), the answer's three; none when ignore (a server that does
// not know return_token_ids). It counts the requests.
type idTalker struct {
	ignore   bool
	requests atomic.Int64
}

func (c *idTalker) Complete(_ context.Context, req wire.Request, _ func(int)) (wire.Response, error) {
	c.requests.Add(1)
	last := req.Messages[len(req.Messages)-1].Content
	r := wire.Response{Reasoning: "thinking about " + last, Content: "answer to " + last, FinishReason: "stop",
		PromptTokens: len(req.Messages), CompletionTokens: 3, UsageKnown: true}
	if c.ignore || !req.ReturnTokenIDs {
		return r, nil
	}
	for _, m := range req.Messages {
		r.PromptTokenIDs = append(r.PromptTokenIDs, int32(len(m.Content)))
	}
	r.TokenIDs = []int32{int32(len(req.Messages)), 1, 2}
	r.Logprobs = &wire.Logprobs{TokenLogprobs: []float32{-1, -2, -3}, TopIDs: [][]int32{{1}, {2}, {3}}, TopLogprobs: [][]float32{{-1}, {-2}, {-3}}}
	return r, nil
}

// TestWholeConversationTokens: with turns: all, each turn keeps the ids of
// its own request (its prompt, the model's earlier answers in it) and
// answer, and the record's are the last turn's.
func TestWholeConversationTokens(t *testing.T) {
	opts := wholeOptions()
	opts.Sampling.ReturnTokenIDs = true
	eng, err := New(&idTalker{}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newConversationSource([]string{"a"}, 2, true), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	r := recordsByID(t, dir)["a"]
	if len(r.Turns) != 3 {
		t.Fatalf("turns %+v", r.Turns)
	}
	// Turn k was sent the system prompt and 2k+1 more messages.
	for k, turn := range r.Turns {
		if n := len(turn.PromptTokenIDs); n != 2*k+2 || !slices.Equal(turn.TokenIDs, []int32{int32(2*k + 2), 1, 2}) {
			t.Errorf("turn %d: prompt ids %v, ids %v; want %d prompt ids, that turn's answer", k, turn.PromptTokenIDs, turn.TokenIDs, 2*k+2)
		}
		if turn.Logprobs == nil || len(turn.Logprobs.TokenLogprobs) != 3 {
			t.Errorf("turn %d: logprobs %+v", k, turn.Logprobs)
		}
	}
	if !slices.Equal(r.TokenIDs, r.Turns[2].TokenIDs) || !slices.Equal(r.PromptTokenIDs, r.Turns[2].PromptTokenIDs) || r.Logprobs == nil {
		t.Errorf("record's ids %v %v, want the last turn's", r.PromptTokenIDs, r.TokenIDs)
	}
}

// TestRequireTokenIDs: a server that ignores return_token_ids is told
// once, after the first answers; with Require the run drains and returns
// the error, keeping what it wrote; without, it goes on.
func TestRequireTokenIDs(t *testing.T) {
	for _, require := range []bool{false, true} {
		t.Run(fmt.Sprint("require=", require), func(t *testing.T) {
			opts := testOptions(2)
			opts.Sampling.ReturnTokenIDs = true
			var told []*NoTokenIDsError
			opts.TokenIDs = TokenIDsPolicy{Sample: 5, Require: require, OnFound: func(e *NoTokenIDsError) { told = append(told, e) }}
			c := &idTalker{ignore: true}
			eng, err := New(c, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := openSink(t, dir)
			_, err = eng.Run(context.Background(), newSliceSource(numberedIDs(100)...), out)
			if cerr := out.Close(); cerr != nil {
				t.Fatal(cerr)
			}
			if len(told) != 1 || told[0].Checked != 5 {
				t.Fatalf("told %v, want once, after 5 answers", told)
			}
			written := len(recordsByID(t, dir))
			var ne *NoTokenIDsError
			if !require {
				if err != nil || written != 100 {
					t.Errorf("err %v, %d written; want the whole run", err, written)
				}
				return
			}
			if !errors.As(err, &ne) {
				t.Fatalf("Run returned %v, want the *NoTokenIDsError", err)
			}
			// Intake stopped at the fifth answer: after it, at most the
			// results buffered for the writer (2) and the requests in
			// flight (2). None of the answers it refused is a record: a
			// resume asks them again.
			if written != 0 || c.requests.Load() > 5+2+2 {
				t.Errorf("%d written, %d asked: want none written, the run stopped at the fifth answer", written, c.requests.Load())
			}
			// Resumed against a server that sends ids: every record has them.
			eng, err = New(&idTalker{}, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			out = openSink(t, dir)
			if _, err := eng.Run(context.Background(), newSliceSource(numberedIDs(100)...), out); err != nil {
				t.Fatalf("resume: %v", err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			recs := recordsByID(t, dir)
			for id, r := range recs {
				if r.TokenIDs == nil {
					t.Errorf("id %s: a record without the ids required", id)
				}
			}
			if len(recs) != 100 {
				t.Errorf("resumed: %d records, want 100", len(recs))
			}
		})
	}
}

// TestTokenIDsHintPerKind: the warning names the server that answered, not
// vLLM's upgrade to a llama.cpp user; the error carries the kind.
func TestTokenIDsHintPerKind(t *testing.T) {
	for _, tc := range []struct {
		kind promscrape.Kind
		want []string
		not  string
	}{
		{promscrape.KindLlamaCpp, []string{"llama.cpp", "generation.return_token_ids: false"}, "vLLM 0.10.2 or later, which"},
		{promscrape.KindSGLang, []string{"SGLang", "generation.return_token_ids: false"}, "vLLM 0.10.2 or later, which"},
		{promscrape.KindVLLM, []string{"vLLM before 0.10.2", "generation.return_token_ids: false"}, "llama"},
		{promscrape.KindUnknown, []string{"vLLM 0.10.2 or later", "generation.return_token_ids: false"}, ""},
	} {
		hint := TokenIDsHint(tc.kind)
		for _, w := range tc.want {
			if !strings.Contains(hint, w) {
				t.Errorf("%q: hint %q lacks %q", tc.kind, hint, w)
			}
		}
		if tc.not != "" && strings.Contains(hint, tc.not) {
			t.Errorf("%q: hint %q says %q", tc.kind, hint, tc.not)
		}
	}
	c := &tokenIDsCheck{want: 1, server: promscrape.KindLlamaCpp}
	if e := c.observe(&sink.Record{Content: "4"}); e == nil || e.Server != promscrape.KindLlamaCpp || e.Hint() != TokenIDsHint(promscrape.KindLlamaCpp) {
		t.Fatalf("error %+v, want one of a llama.cpp server with its hint", e)
	}
}

// mixedIDs answers with ids but for the prompts in without, as replicas
// of which one ignores return_token_ids.
type mixedIDs struct {
	idTalker
	without map[string]bool
}

func (c *mixedIDs) Complete(ctx context.Context, req wire.Request, d func(int)) (wire.Response, error) {
	r, err := c.idTalker.Complete(ctx, req, d)
	if c.without[req.Messages[len(req.Messages)-1].Content] {
		r.PromptTokenIDs, r.TokenIDs, r.Logprobs = nil, nil, nil
	}
	return r, err
}

// TestRequiredIDsMissingLater: under require_token_ids, answers without
// ids after the first ones had them are not written either, and the run
// does not end as if done: it returns a *RefusedTokenIDsError.
func TestRequiredIDsMissingLater(t *testing.T) {
	opts := testOptions(1)
	opts.Sampling.ReturnTokenIDs = true
	opts.TokenIDs = TokenIDsPolicy{Sample: 5, Require: true}
	c := &mixedIDs{without: map[string]bool{"prompt 7": true, "prompt 9": true}}
	eng, err := New(c, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	_, err = eng.Run(context.Background(), newSliceSource(numberedIDs(12)...), out)
	if cerr := out.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	var re *RefusedTokenIDsError
	if !errors.As(err, &re) || re.Answers != 2 {
		t.Fatalf("Run returned %v, want a *RefusedTokenIDsError of 2 answers", err)
	}
	recs := recordsByID(t, dir)
	if _, ok := recs["7"]; ok || len(recs) != 10 {
		t.Errorf("%d records (7 among them: %v), want the 10 with ids", len(recs), ok)
	}
}
