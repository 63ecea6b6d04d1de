package autoconc

// The judged tests of concurrency: auto: the loop (Prepare, Step) scrapes
// the /metrics of batch-model servers over HTTP and steers the limit a
// client holds in them, on a clock the test advances. The servers
// (held.Server, mockserver/held) run the mock's batch model stepped on
// that clock, so their throughput is a function of the requests held,
// never of the CPU this test gets: the same moves on any machine, loaded
// or not, in well under a second. cmd/synthgen's auto tests check the same
// loop wired into a real run.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/mockserver/held"
)

// The knee model, as cmd/synthgen's kneeMock: prompts of kneePrompt
// tokens, answers of at most kneeMaxTokens (20 on average), 40 ms a token
// slowing with the batch, and a KV budget of knee x (prompt + answer)
// tokens, so that up to knee requests are never preempted and more are.
const (
	kneePrompt    = 400
	kneeMaxTokens = 24
)

func kneeServer(knee, requests int) held.Options {
	return held.Options{
		Prompt: kneePrompt, MinTokens: 16, MaxTokens: kneeMaxTokens,
		TokenDelay: 40 * time.Millisecond, BatchScale: 400,
		KVBudget: knee * (kneePrompt + kneeMaxTokens), MaxRunning: 512,
		Requests: requests, Seed: uint64(knee),
	}
}

// heldMove is one move of the run's limit, at the clock's elapsed time.
type heldMove struct {
	to  int
	at  time.Duration
	why string
}

func (m heldMove) String() string { return fmt.Sprintf("%d at %s (%s)", m.to, m.at, m.why) }

// heldResult is a run of the loop against Held servers until every
// request is answered.
type heldResult struct {
	moves     []heldMove
	limit     int   // the run's, at the end
	endpoints []int // each endpoint's limit at the end (several endpoints)
	counts    []held.Counts
	took      time.Duration // on the test's clock
	log       string
}

// recordingTarget is the run's limit, its moves on the test's clock.
type recordingTarget struct {
	limit, ceiling int
	start          time.Time
	moves          []heldMove
}

func (r *recordingTarget) Limit() int { return r.limit }
func (r *recordingTarget) SetLimit(limit int, why string, at time.Time) int {
	r.limit = max(1, min(limit, r.ceiling))
	r.moves = append(r.moves, heldMove{to: r.limit, at: at.Sub(r.start), why: why})
	return r.limit
}

// runHeld steers a client against servers made from opts, looking every
// 500 ms (a run's with progress.interval 500ms), until all their requests
// are answered. tokensAtEnd: the client counts an answer's tokens at its
// end (a plain request), else as they stream.
func runHeld(t *testing.T, ceiling int, tokensAtEnd bool, opts ...held.Options) heldResult {
	t.Helper()
	const every = 500 * time.Millisecond
	ctx := context.Background()
	clock := time.Unix(1_700_000_000, 0)
	servers := make([]*held.Server, len(opts))
	eps := make([]Endpoint, len(opts))
	for i, o := range opts {
		servers[i] = held.New(o)
		ts := httptest.NewServer(servers[i])
		t.Cleanup(ts.Close)
		sc := promscrape.NewScraper(ts.URL+"/metrics", ts.Client())
		eps[i] = Endpoint{URL: ts.URL + "/metrics", Scrape: sc.Scrape}
	}
	tg := &recordingTarget{limit: StartLimit(ceiling), ceiling: ceiling, start: clock}
	endpoints := make([]int, len(opts))
	var log strings.Builder
	l, err := Prepare(ctx, eps, LoopOptions{
		Ceiling: ceiling, Every: every, Target: tg, TokensAtEnd: tokensAtEnd,
		Now: func() time.Time { return clock },
		Client: func() ClientView {
			var v ClientView
			for _, s := range servers {
				c := s.Counts()
				tokens := c.Streamed
				if tokensAtEnd {
					tokens = c.AtEnd
				}
				v.InFlight += c.InFlight
				v.Endpoints = append(v.Endpoints, EndpointView{InFlight: c.InFlight, Tokens: int64(tokens), Answers: int64(c.Answers)})
			}
			return v
		},
		SetEndpointLimit: func(i, limit int) { endpoints[i] = limit },
		Log:              &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := func() bool {
		for i, s := range servers {
			if s.Counts().Answers < opts[i].Requests {
				return false
			}
		}
		return true
	}
	for !done() {
		if clock.Sub(tg.start) > 10*time.Minute {
			t.Fatalf("not all answered after 10 min of the test's clock: %+v\n%s", counts(servers), log.String())
		}
		for i, s := range servers {
			hold := tg.Limit()
			if len(servers) > 1 {
				hold = endpoints[i]
			}
			s.Advance(hold, every)
		}
		clock = clock.Add(every)
		l.Step(ctx)
	}
	return heldResult{moves: tg.moves, limit: tg.Limit(), endpoints: endpoints, counts: counts(servers),
		took: clock.Sub(tg.start), log: log.String()}
}

func counts(servers []*held.Server) []held.Counts {
	var c []held.Counts
	for _, s := range servers {
		c = append(c, s.Counts())
	}
	return c
}

// runFixed holds limit requests in a server made from o until all are
// answered.
func runFixed(o held.Options, limit int) held.Counts {
	s := held.New(o)
	for s.Counts().Answers < o.Requests {
		s.Advance(limit, time.Second)
	}
	return s.Counts()
}

// settledAt is when the limit last entered lo..hi and stayed there to the
// end; -1: it ended outside.
func settledAt(moves []heldMove, lo, hi int) time.Duration {
	settled := time.Duration(-1)
	for _, m := range moves {
		switch {
		case m.to < lo || m.to > hi:
			settled = -1
		case settled < 0:
			settled = m.at
		}
	}
	return settled
}

func joinMoves(moves []heldMove) string {
	s := make([]string, len(moves))
	for i, m := range moves {
		s[i] = m.String()
	}
	return strings.Join(s, " | ")
}

// TestAutoConcurrencyFindsTheKnee: the batch model's throughput peaks at
// K = 100 in flight: every prompt is 400 tokens and every answer at most
// 24, and the KV budget is 100 x (400 + 24) tokens, so up to 100 requests
// can never be preempted; above that, admission lets in about
// budget/400 = 106 and their growth preempts the newest ones, which redo
// their work, while the rest queue. Below 100, per-token time
// 40ms x (1 + running/400) makes throughput rise almost in proportion.
//
// concurrency: auto:400 over 1,500 plain answers must have its limit
// within 20% of K (80..120) from some moment in the first minute to the
// end, and cause fewer preemptions than the same prompts at a fixed 200,
// which preempts for certain: its first 106 requests are admitted
// together, prompts filling the budget, and their first tokens overflow
// it.
func TestAutoConcurrencyFindsTheKnee(t *testing.T) {
	t.Parallel()
	const (
		knee    = 100
		prompts = 6000
	)
	o := kneeServer(knee, prompts)
	auto := runHeld(t, 400, true, o)
	if len(auto.moves) == 0 {
		t.Fatalf("concurrency: auto never moved the limit:\n%s", auto.log)
	}
	lo, hi := knee*8/10, knee*12/10
	settled := settledAt(auto.moves, lo, hi)
	t.Logf("auto: %+v in %s, settled within 20%% of %d at %s; moves: %s", auto.counts[0], auto.took, knee, settled, joinMoves(auto.moves))
	switch {
	case settled < 0:
		t.Errorf("the limit ended outside %d..%d: %s", lo, hi, joinMoves(auto.moves))
	case settled > time.Minute:
		t.Errorf("the limit settled within %d..%d only at %s of the run, after the first minute", lo, hi, settled)
	}
	if last := auto.moves[len(auto.moves)-1].to; auto.limit != last {
		t.Errorf("the run's limit %d is not the last move's %d", auto.limit, last)
	}
	fixed := runFixed(o, 200)
	t.Logf("fixed 200: %+v", fixed)
	if auto.counts[0].Preemptions >= fixed.Preemptions {
		t.Errorf("preemptions: auto %d, fixed 200 %d; want fewer with auto", auto.counts[0].Preemptions, fixed.Preemptions)
	}
	if auto.counts[0].Answers != prompts || fixed.Answers != prompts {
		t.Errorf("answers: auto %d, fixed %d; want %d each", auto.counts[0].Answers, fixed.Answers, prompts)
	}
}

// TestAutoKneeWhenTheServerCountsAtEnd: a server that counts generated
// tokens only when a request finishes, with no counter before the first
// one (llm-d-inference-sim; Held with CountTokensAtEnd). The knee model at
// K = 40 is run once counting per token and once at the end, answers
// streamed. concurrency: auto must end within 20% of K against both, and
// the two limits within 20% of each other: throughput is the client's own
// streamed count, and the server's counter steers nothing.
func TestAutoKneeWhenTheServerCountsAtEnd(t *testing.T) {
	t.Parallel()
	const (
		knee    = 40
		prompts = 2400
	)
	final := map[bool]int{}
	for _, atEnd := range []bool{false, true} {
		o := kneeServer(knee, prompts)
		o.CountTokensAtEnd = atEnd
		res := runHeld(t, 400, false, o)
		if len(res.moves) == 0 {
			t.Fatalf("tokens counted at the end %v: the limit never moved:\n%s", atEnd, res.log)
		}
		final[atEnd] = res.limit
		lo, hi := knee*8/10, knee*12/10
		settled := settledAt(res.moves, lo, hi)
		t.Logf("tokens counted at the end %v: %+v, ended at %d, within 20%% of %d from %s; moves: %s",
			atEnd, res.counts[0], res.limit, knee, settled, joinMoves(res.moves))
		if settled < 0 {
			t.Errorf("tokens counted at the end %v: the limit ended outside %d..%d: %s", atEnd, lo, hi, joinMoves(res.moves))
		}
	}
	if a, b := final[true], final[false]; 5*a < 4*b || 5*a > 6*b {
		t.Errorf("the limit ended at %d against the server counting at the end, %d against the one counting per token: more than 20%% apart", a, b)
	}
}

// TestAutoPerEndpoint: with two replicas, each peaking at 40 in flight,
// concurrency: auto steers each by its own metrics: each endpoint's limit
// stays near its own knee rather than the ceiling, and the run's limit is
// their sum.
func TestAutoPerEndpoint(t *testing.T) {
	t.Parallel()
	const (
		knee    = 40
		prompts = 1800 // each
	)
	a, b := kneeServer(knee, prompts), kneeServer(knee, prompts)
	b.Seed++
	res := runHeld(t, 400, true, a, b)
	t.Logf("endpoints' limits %v, run's %d; %+v; moves: %s", res.endpoints, res.limit, res.counts, joinMoves(res.moves))
	sum := 0
	for i, l := range res.endpoints {
		if l < knee/2 || l > 2*knee {
			t.Errorf("endpoint %d ended at limit %d: not steered to its own knee %d (within %d..%d)", i, l, knee, knee/2, 2*knee)
		}
		sum += l
	}
	if res.limit != sum {
		t.Errorf("the run's limit %d is not the sum %d of the endpoints'", res.limit, sum)
	}
}
