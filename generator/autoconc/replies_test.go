package autoconc

import (
	"strings"
	"testing"
	"time"
)

// replyFeed steps a Controller steered by replies one second a reading,
// its counts cumulative as the runner hands them.
type replyFeed struct {
	c   *Controller
	at  time.Time
	sum Replies
}

func newReplyFeed(ceiling int) *replyFeed {
	f := &replyFeed{c: New(Options{Ceiling: ceiling, ByReplies: true}), at: time.Unix(0, 0)}
	f.c.Observe(Reading{At: f.at}) // the baseline
	return f
}

// step is one second in which ended attempts ended (limited of them 429),
// each after latency seconds at the server, and waited requests waited for
// their share; all of the limit in flight.
func (f *replyFeed) step(ended, limited, waited int64, latency float64) Decision {
	f.at = f.at.Add(time.Second)
	f.sum.Ended += ended
	f.sum.Limited += limited
	f.sum.Waited += waited
	f.sum.Busy += float64(ended) * latency
	return f.c.Observe(Reading{At: f.at, InFlight: f.c.Limit(), Replies: f.sum})
}

// TestRepliesSlowStartCutAndCooldown: answers fine double the limit
// (16, 32, 64); a 429 cuts it by 0.75; another within the cooldown (5 s)
// holds it; one after cuts again; then it grows by the constant step
// (Ceiling/64 = 8), not doubling.
func TestRepliesSlowStartCutAndCooldown(t *testing.T) {
	f := newReplyFeed(512)
	for _, want := range []int{32, 64, 128} {
		if d := f.step(20, 0, 0, 0.5); d.Limit != want || d.Reason != "grow: answers fine" {
			t.Fatalf("answers fine: %+v, want %d", d, want)
		}
	}
	if d := f.step(20, 1, 0, 0.5); d.Limit != 96 || d.Reason != "back off: 1 of 20 answers 429" {
		t.Fatalf("a 429: %+v, want 96", d)
	}
	for range 4 {
		if d := f.step(20, 2, 0, 0.5); d.Limit != 96 || !strings.Contains(d.Reason, "cooling down") {
			t.Fatalf("429s within the cooldown: %+v, want a hold at 96", d)
		}
	}
	if d := f.step(20, 1, 0, 0.5); d.Limit != 72 {
		t.Fatalf("a 429 after the cooldown: %+v, want 72", d)
	}
	for _, want := range []int{80, 88, 96} {
		if d := f.step(20, 0, 0, 0.5); d.Limit != want {
			t.Fatalf("answers fine after a cut: %+v, want %d (+8)", d, want)
		}
	}
}

// TestRepliesCutOnLatency: a reading whose mean latency is over twice the
// lowest measured cuts; one under it, or of too few answers to judge,
// does not.
func TestRepliesCutOnLatency(t *testing.T) {
	f := newReplyFeed(512)
	f.step(20, 0, 0, 1) // 32, the lowest: 1 s
	if d := f.step(20, 0, 0, 1.9); d.Limit != 64 {
		t.Fatalf("latency 1.9 s: %+v, want growth to 64", d)
	}
	if d := f.step(minJudged-1, 0, 0, 5); d.Limit != 128 {
		t.Fatalf("latency 5 s over %d answers: %+v, want growth (too few to judge)", minJudged-1, d)
	}
	d := f.step(20, 0, 0, 2.5)
	if d.Limit != 96 || d.Reason != "back off: latency 2.5s, over 2x the lowest 1s" {
		t.Fatalf("latency 2.5 s: %+v, want a cut to 96", d)
	}
}

// TestRepliesCeilingFromStatedLimits: under stated limits the limit grows
// freely while nothing waits for its share (the first minute's bucket),
// and once requests wait it goes down to Little's law with a quarter's
// headroom: 600 requests a minute at 0.5 s is 10 x 0.5 x 1.25, 7; 60,000
// tokens a minute at 200 a request, 5 x 0.5 x 1.25, 4; never below 1.
func TestRepliesCeilingFromStatedLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		said     Replies
		latency  float64
		want     int
		reasonIn string
	}{
		{"requests", Replies{RequestsPerMinute: 600}, 0.5, 7, "600 requests a minute"},
		{"tokens", Replies{TokensPerMinute: 60000, Cost: 200}, 0.5, 4, "60000 tokens a minute at 200 a request"},
		{"both, tokens bind", Replies{RequestsPerMinute: 600, TokensPerMinute: 60000, Cost: 200}, 0.5, 4, "tokens a minute"},
		{"fast answers", Replies{RequestsPerMinute: 600}, 0.001, 1, "1ms mean latency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReplyFeed(512)
			f.sum = tc.said
			f.c.replies.prev = tc.said
			if d := f.step(20, 0, 0, tc.latency); d.Limit != 32 {
				t.Fatalf("nothing waited: %+v, want growth to 32", d)
			}
			d := f.step(20, 0, 5, tc.latency)
			if d.Limit != tc.want || !strings.Contains(d.Reason, tc.reasonIn) {
				t.Fatalf("requests waited: %+v, want down to %d, naming %q", d, tc.want, tc.reasonIn)
			}
			if d := f.step(20, 0, 5, tc.latency); d.Limit != tc.want || !strings.HasPrefix(d.Reason, "hold: at the limits' ceiling") {
				t.Fatalf("at the ceiling: %+v, want a hold at %d", d, tc.want)
			}
		})
	}
}

// TestRepliesOnAServerThatQueues: a stepped model of a server that runs 64
// at once and queues the rest (latency 1 s up to 64 in flight, then in
// proportion), without stated limits: after the first 30 s the limit
// stays at 64 at least (the server full) and at most 160 (the latency
// bound is twice the lowest: 128, and a cut of the step past it by 0.75
// lands within).
func TestRepliesOnAServerThatQueues(t *testing.T) {
	f := newReplyFeed(512)
	var low, high int
	for i := range 120 {
		n := f.c.Limit()
		latency := max(1, float64(n)/64)
		f.step(int64(float64(n)/latency), 0, 0, latency)
		if i >= 30 {
			low, high = min(low, f.c.Limit()), max(high, f.c.Limit())
			if i == 30 {
				low, high = f.c.Limit(), f.c.Limit()
			}
		}
	}
	if low < 64 || high > 160 {
		t.Errorf("after 30 s the limit ranged %d..%d, want within 64..160", low, high)
	}
}
