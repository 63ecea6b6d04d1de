package pool

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// talker is a Completer that answers each request from its last user turn
// and records what it was sent. fail, when set, decides per request
// whether it fails (and how).
type talker struct {
	mu   sync.Mutex
	sent [][]chat.Message
	fail func(last string, nth int) error // nth: how often this last turn was asked before
	seen map[string]int
}

func (c *talker) Complete(_ context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	c.mu.Lock()
	c.sent = append(c.sent, slices.Clone(req.Messages))
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	nth := c.seen[last]
	c.seen[last]++
	c.mu.Unlock()
	if onDelta != nil {
		onDelta(3) // three streamed deltas before any failure: a retry takes them back
	}
	if c.fail != nil {
		if err := c.fail(last, nth); err != nil {
			return wire.Response{}, err
		}
	}
	return wire.Response{
		Reasoning: "thinking about " + last, Content: "answer to " + last, FinishReason: "stop",
		PromptTokens: 10 * len(req.Messages), CompletionTokens: 7, UsageKnown: true, Chunks: 3,
	}, nil
}

// conversationSource yields rows of whole conversations: user turns u0, u1,
// ... each followed by a dataset answer, and, with trailing, one more user
// turn no answer follows.
type conversationSource struct {
	rows     []dataset.Prompt
	next     int
	trailing bool
}

func newConversationSource(ids []string, turns int, trailing bool) *conversationSource {
	s := &conversationSource{trailing: trailing}
	for i, id := range ids {
		var conv []chat.Message
		for k := range turns {
			conv = append(conv, chat.Message{Role: "user", Content: fmt.Sprintf("%s/u%d", id, k)}, chat.Message{Role: "assistant"})
		}
		if trailing {
			conv = append(conv, chat.Message{Role: "user", Content: id + "/last"})
		}
		s.rows = append(s.rows, dataset.Prompt{ID: id, Index: int64(i), Messages: conv[:1], Conversation: conv})
	}
	return s
}

func (s *conversationSource) Next() (dataset.Prompt, error) {
	if s.next == len(s.rows) {
		return dataset.Prompt{}, io.EOF
	}
	s.next++
	return s.rows[s.next-1], nil
}

func wholeOptions() Options {
	return Options{
		Concurrency: 4,
		Sampling:    job.Sampling{Model: "m", MaxTokens: 64},
		Prompt:      job.Prompting{SystemPrompt: "be brief", Turns: job.TurnsAll},
		Retry:       RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
	}
}

// TestWholeConversation: each assistant turn is asked with the model's own
// earlier answers (content only), a trailing user turn is answered too, and
// the record holds every turn with the sums; the stats count the key once
// and every turn's tokens.
func TestWholeConversation(t *testing.T) {
	c := &talker{}
	stats := runstats.NewStats(nil)
	eng, err := New(c, stats, wholeOptions())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newConversationSource([]string{"a", "b"}, 2, true), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	recs := recordsByID(t, dir)
	r, ok := recs["a"]
	if !ok || len(recs) != 2 {
		t.Fatalf("records %v, want a and b", recs)
	}
	sys := chat.Message{Role: "system", Content: "be brief"}
	want := []chat.Message{sys, {Role: "user", Content: "a/u0"}, {Role: "assistant", Content: "answer to a/u0"},
		{Role: "user", Content: "a/u1"}, {Role: "assistant", Content: "answer to a/u1"}, {Role: "user", Content: "a/last"}}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("the last turn was sent\n%+v\nwant\n%+v", r.Messages, want)
	}
	var asked [][]chat.Message
	for _, m := range c.sent {
		if strings.HasPrefix(m[len(m)-1].Content, "a/") {
			asked = append(asked, m)
		}
	}
	if len(asked) != 3 || !reflect.DeepEqual(asked[0], want[:2]) || !reflect.DeepEqual(asked[1], want[:4]) || !reflect.DeepEqual(asked[2], want) {
		t.Errorf("requests for a:\n%+v\nwant the conversation grown by the model's own answers, turn by turn", asked)
	}
	for _, m := range r.Messages {
		if strings.Contains(m.Content, "thinking") {
			t.Errorf("an earlier turn's reasoning was sent: %+v", m)
		}
	}
	if len(r.Turns) != 3 || r.Turns[0].Content != "answer to a/u0" || r.Turns[2].Reasoning != "thinking about a/last" {
		t.Errorf("turns %+v", r.Turns)
	}
	if r.Content != "answer to a/last" || r.CompletionTokens != 21 || r.PromptTokens != 10*(2+4+6) || r.Attempts != 3 {
		t.Errorf("record: content %q, tokens %d/%d, attempts %d", r.Content, r.PromptTokens, r.CompletionTokens, r.Attempts)
	}
	snap := stats.Snapshot()
	if snap.Done != 2 || snap.CompletionTokens != 2*21 || snap.PromptTokens != 2*120 {
		t.Errorf("stats: done %d, completion %d, prompt %d; want 2 keys and every turn's tokens", snap.Done, snap.CompletionTokens, snap.PromptTokens)
	}
}

// TestWholeConversationFailsWhole: a turn that fails for good fails the
// key, with no record (never half a conversation) and the attempts of
// every turn; a retried turn keeps the earlier turns' tokens in the stats,
// and a later run with retry_errors asks the whole conversation again.
func TestWholeConversationFailsWhole(t *testing.T) {
	c := &talker{fail: func(last string, nth int) error {
		switch {
		case last == "bad/u1":
			return &wire.Error{Status: 400, Cause: "http_400", Message: "refused"}
		case last == "ok/u1" && nth == 0:
			return &wire.Error{Status: 503, Cause: "http_503", Retryable: true}
		}
		return nil
	}}
	stats := runstats.NewStats(nil)
	eng, err := New(c, stats, wholeOptions())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	sum, err := eng.Run(context.Background(), newConversationSource([]string{"bad", "ok"}, 3, false), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if sum.Written != 1 || sum.Failed != 1 {
		t.Fatalf("summary %+v, want one record and one failure", sum)
	}
	errs := readJSONL[sink.ErrorRecord](t, dir, "errors")
	if len(errs) != 1 || errs[0].ID != "bad" || errs[0].Attempts != 2 || errs[0].Cause != "http_400" {
		t.Errorf("error records %+v, want bad's, after 2 attempts (turn 1, then the refused turn 2)", errs)
	}
	recs := recordsByID(t, dir)
	if _, ok := recs["bad"]; ok {
		t.Error("half a conversation was written")
	}
	if r := recs["ok"]; len(r.Turns) != 3 || r.Attempts != 4 {
		t.Errorf("ok: %d turns, %d attempts; want 3 turns in 4 attempts (one retried)", len(r.Turns), r.Attempts)
	}
	if snap := stats.Snapshot(); snap.CompletionTokens != 21 || snap.Retries != 1 {
		t.Errorf("stats: %d completion tokens, %d retries; want ok's 3 turns (21) and the retry", snap.CompletionTokens, snap.Retries)
	}

	c.fail = nil
	eng, _ = New(c, runstats.NewStats(nil), func() Options { o := wholeOptions(); o.RetryErrors = true; return o }())
	out = openSink(t, dir)
	if _, err := eng.Run(context.Background(), newConversationSource([]string{"bad", "ok"}, 3, false), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if r := recordsByID(t, dir)["bad"]; len(r.Turns) != 3 || r.Turns[0].Content != "answer to bad/u0" {
		t.Errorf("bad after retry_errors: %+v, want its whole conversation", r.Turns)
	}
	if n := len(readJSONL[sink.Record](t, dir, "data")); n != 2 {
		t.Errorf("%d records on disk, want 2", n)
	}
}
