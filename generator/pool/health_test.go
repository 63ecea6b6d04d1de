package pool

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// TestHealthWindow: an endpoint is taken out only once its window holds
// enough attempts and most of them failed; its reason counts them by cause.
func TestHealthWindow(t *testing.T) {
	var h health
	for range healthMin - 1 {
		h.note("http_500")
	}
	if h.failing() {
		t.Fatalf("failing after %d attempts, want only from %d", healthMin-1, healthMin)
	}
	h.note("http_500")
	if !h.failing() {
		t.Fatalf("%d of %d failed: not failing", h.fails, h.n)
	}
	for range healthWindow {
		h.note("http_500")
	}
	if got, want := h.describe(), "20 of the last 20 attempts failed (http_500)"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	// Successes push the failures out of the window.
	for range healthWindow / 2 {
		h.note("")
	}
	if h.failing() {
		t.Errorf("%d of %d failed: still failing", h.fails, h.n)
	}
	h = health{}
	for _, c := range []string{"connection", "http_429", "connection", "", "connection", "http_429", "connection", "connection", "connection", "connection"} {
		h.note(c)
	}
	if got, want := h.describe(), "9 of the last 10 attempts failed (connection 7, http_429 2)"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	// The share is inclusive: exactly healthSick (8 of 10) is failing,
	// one success more (7 of 10) is not.
	h = health{}
	for _, c := range []string{"http_500", "", "http_500", "http_500", "", "http_500", "http_500", "http_500", "http_500", "http_500"} {
		h.note(c)
	}
	if !h.failing() {
		t.Errorf("%d of %d failed, exactly the share that takes it out: not failing", h.fails, h.n)
	}
	h = health{}
	for _, c := range []string{"http_500", "", "http_500", "", "", "http_500", "http_500", "http_500", "http_500", "http_500"} {
		h.note(c)
	}
	if h.failing() {
		t.Errorf("%d of %d failed, under the share: failing", h.fails, h.n)
	}
}

// fakeClock is a router's clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestRouterTakesOutAFailingEndpoint: an endpoint whose attempts fail is
// taken out with its reason shown, gets only trials, spaced by a doubling
// wait, and is let back in by the first trial that succeeds. The last well
// endpoint is never taken out.
func TestRouterTakesOutAFailingEndpoint(t *testing.T) {
	r := testRouter(3)
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	r.now = clock.now
	var said []string
	r.say = func(s string) { said = append(said, s) }
	fail := &wire.Error{Cause: "http_500", Status: 500, Retryable: true}
	for range healthWindow {
		r.release(lease{ep: r.eps[2]}, clock.now(), wire.Response{}, fail, fail)
	}
	st := r.eps[2].State()
	if !st.Down || st.Reason != "10 of the last 10 attempts failed (http_500)" {
		t.Fatalf("after %d failures: state %+v, want down with its reason", healthWindow, st)
	}
	if snap := r.stats.Snapshot().Endpoints[2]; snap.State != runstats.EndpointDown || snap.Reason == "" {
		t.Errorf("snapshot shows %s %q, want down with a reason", snap.State, snap.Reason)
	}
	if len(said) != 1 || !strings.Contains(said[0], "taken out: 10 of the last 10 attempts failed (http_500)") {
		t.Errorf("said %q, want one line naming the cause", said)
	}
	for range 30 {
		if l := r.pick(nil, prefixChain{}); l.ep.idx == 2 {
			t.Fatal("a sick endpoint took an ordinary request before its trial was due")
		}
	}
	// Its trial comes after trialFirst, and only one at a time.
	clock.add(trialFirst)
	l := r.pick(nil, prefixChain{})
	if l.ep.idx != 2 || !l.trial {
		t.Fatalf("trial due: picked %d (trial %v), want endpoint 2's trial", l.ep.idx, l.trial)
	}
	if r.eps[2].State().Probing != true {
		t.Error("a trial in flight: the endpoint is not shown probing")
	}
	if o := r.pick(nil, prefixChain{}); o.ep.idx == 2 {
		t.Fatal("a second trial while the first is in flight")
	}
	// A failed trial puts the next off, doubled.
	r.release(l, clock.now(), wire.Response{}, fail, fail)
	clock.add(trialFirst)
	if o := r.pick(nil, prefixChain{}); o.ep.idx == 2 {
		t.Fatal("the next trial came after trialFirst, want after twice that")
	}
	clock.add(trialFirst)
	l = r.pick(nil, prefixChain{})
	if !l.trial {
		t.Fatal("the second trial is not due after twice trialFirst")
	}
	r.release(l, clock.now(), wire.Response{}, nil, nil)
	if r.eps[2].State().Down {
		t.Fatal("a trial succeeded: the endpoint is still out")
	}
	if !strings.Contains(said[len(said)-1], "back in") {
		t.Errorf("said %q last, want the endpoint back in", said[len(said)-1])
	}

	// Two of three failing: both out. The third failing too: it stays in,
	// since failures on every endpoint say nothing of any one of them.
	for _, i := range []int{0, 1, 2} {
		for range healthWindow {
			r.release(lease{ep: r.eps[i]}, clock.now(), wire.Response{}, fail, fail)
		}
	}
	if !r.eps[0].State().Down || !r.eps[1].State().Down || r.eps[2].State().Down {
		t.Errorf("states %v %v %v, want the first two out and the last in", r.eps[0].State().Down, r.eps[1].State().Down, r.eps[2].State().Down)
	}
}

// TestRouterRetryAfterHoldsTheEndpoint: a Retry-After holds back the
// endpoint that sent it, at most maxHold, and the others take the requests.
func TestRouterRetryAfterHoldsTheEndpoint(t *testing.T) {
	r := testRouter(2)
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	r.now, r.maxHold = clock.now, 10*time.Second
	busy := &wire.Error{Cause: "http_429", Status: 429, Retryable: true, RetryAfter: time.Hour}
	r.release(lease{ep: r.eps[0]}, clock.now(), wire.Response{}, busy, busy)
	if r.elsewhere(tried{false, true}) {
		t.Error("endpoint 0 is held back, endpoint 1 excluded: elsewhere says there is one")
	}
	if !r.elsewhere(tried{true, false}) {
		t.Error("endpoint 1 is well: elsewhere says there is none")
	}
	for range 5 {
		if l := r.pick(nil, prefixChain{}); l.ep.idx != 1 {
			t.Fatal("a request went to the endpoint its Retry-After holds back")
		}
	}
	clock.add(10 * time.Second) // maxHold, not the hour asked
	setInFlight(r.eps[1].stats, 5)
	if l := r.pick(nil, prefixChain{}); l.ep.idx != 0 {
		t.Errorf("after max_backoff the held endpoint is still passed over")
	}
}

// TestSameModel: the spellings one model has in answers are the job's; a
// different model is not.
func TestSameModel(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		same      bool
	}{
		{"m", "m", true},
		{"m", "", true},
		{"gpt-4o", "gpt-4o-2024-08-06", true},
		{"gpt-4", "gpt-4-0613", true},
		{"claude-3-5-sonnet", "claude-3-5-sonnet-20241022", true},
		{"gpt-4o", "openai/gpt-4o", true},
		{"/models/qwen3", "qwen3", true},
		{"gpt-4o", "gpt-4o-mini-2024-07-18", false},
		{"gpt-4o", "gpt-4o-mini", false},
		{"mock-model", "evil-model", false},
		{"qwen3", "qwen3-8b", false},
	} {
		if got := sameModel(tc.want, tc.got); got != tc.same {
			t.Errorf("sameModel(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.same)
		}
	}
}

// TestThreeReplicasOneBad: three replicas of which one fails every request
// (a 500, a 429 with Retry-After: 3600, a reset before any byte, a reset
// halfway, an HTML page, an answer from another model): every prompt is
// answered, each at its first attempt (the bad replica's failures are
// retried on the others, uncharged), the bad replica gets a bounded share of
// the requests, and it is shown down with its cause.
func TestThreeReplicasOneBad(t *testing.T) {
	t.Parallel()
	const rows, conc = 400, 12
	base := mockserver.Options{Model: "test-model", MeanTokens: 300, TokenDelay: 100 * time.Microsecond, Seed: 5}
	for _, tc := range []struct {
		name  string
		bad   func(o *mockserver.Options)
		wrap  func(http.Handler) http.Handler
		cause string
		held  bool // held back by Retry-After rather than taken out
		plain bool // plain answers, not streams
	}{
		{name: "500", bad: func(o *mockserver.Options) { o.Rate500 = 1 }, cause: "http_500"},
		{name: "429-retry-after-3600", bad: func(o *mockserver.Options) { o.Rate429, o.RetryAfter = 1, time.Hour }, cause: "http_429", held: true},
		{name: "reset", bad: func(o *mockserver.Options) { o.RateReset = 1 }, cause: "attempts failed"},
		{name: "reset-mid", bad: func(o *mockserver.Options) { o.RateResetMid = 1 }, cause: "attempts failed"},
		{name: "html", bad: func(o *mockserver.Options) { o.RateGarbage = 1 }, cause: "decode"},
		{name: "html-plain", bad: func(o *mockserver.Options) { o.RateGarbage = 1 }, cause: "decode", plain: true},
		{name: "other-model", wrap: answerAs("evil-model"), cause: wire.CauseModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			badOpts := base
			if tc.bad != nil {
				tc.bad(&badOpts)
			}
			wrap := tc.wrap
			if wrap == nil {
				wrap = func(h http.Handler) http.Handler { return h }
			}
			same := func(h http.Handler) http.Handler { return h }
			reps := []*replica{
				startReplica(t, mockserver.New(badOpts), wrap),
				startReplica(t, mockserver.New(base), same),
				startReplica(t, mockserver.New(base), same),
			}
			stats := runstats.NewStats(nil)
			targets := make([]Endpoint, len(reps))
			urls := make([]string, len(reps))
			for i, rp := range reps {
				urls[i] = rp.url()
				targets[i] = Endpoint{URL: urls[i], Client: wire.New(wire.Options{BaseURL: urls[i], MaxConns: conc})}
			}
			stats.SetEndpoints(urls)
			eo := testOptions(conc)
			eo.Stream = !tc.plain
			eo.Sampling.MaxTokens = 16
			eo.Endpoints = targets
			eo.Retry = RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond}
			if tc.held {
				// A hold lasts the Retry-After capped at max_backoff: one
				// longer than the whole run is still in force when the run
				// ends, however fast the machine got through it (a 50 ms
				// hold may run out before the snapshot, and the replica be
				// up again, rightly). A failed attempt moves elsewhere
				// uncharged, so the long hold slows no prompt.
				eo.Retry.MaxBackoff = time.Minute
			}
			var log bytes.Buffer
			eo.Log = &syncWriter{w: &log}
			eng, err := New(targets[0].Client, stats, eo)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := openSink(t, dir)
			snap := runEveryRow(t, eng, stats, out, rows, 90*time.Second)
			recs := readRecords(t, dir)
			for id, rs := range recs {
				if len(rs) != 1 || rs[0].Attempts != 1 {
					t.Errorf("id %s: %d records, attempts %d; want one, at its first attempt", id, len(rs), rs[0].Attempts)
				}
				if rs[0].Model != "test-model" {
					t.Errorf("id %s: model %q", id, rs[0].Model)
				}
			}
			// Taken out after its first failures: it saw its window's
			// worth, what was in flight then, and its trials, not a third
			// of the run.
			badHits := snap.Endpoints[0].Requests + snap.Endpoints[0].Failures
			if badHits > rows/4 {
				t.Errorf("the bad replica saw %d attempts of %d rows: not routed around", badHits, rows)
			}
			if snap.Endpoints[0].State == runstats.EndpointUp || !strings.Contains(snap.Endpoints[0].Reason, tc.cause) {
				t.Errorf("bad replica shown %s %q, want down naming %q", snap.Endpoints[0].State, snap.Endpoints[0].Reason, tc.cause)
			}
			for cause := range snap.RetriesByCause {
				if snap.RetryLast[cause] == "" {
					t.Errorf("retries of cause %s counted, but not what the last one was (retry_last)", cause)
				}
			}
			rec := runstats.NewProgressRecord(snap, nil)
			if len(rec.Endpoints) != 3 || !strings.Contains(rec.Endpoints[0].DownReason, tc.cause) {
				t.Errorf("status.json's endpoint: %+v, want its down_reason", rec.Endpoints)
			}
			if tc.held {
				// Held back by its Retry-After (capped at max_backoff)
				// after its 429s, and taken out too when it failed ten
				// times first: either is the truth, and says http_429.
				return
			}
			if !strings.Contains(log.String(), "taken out") || !strings.Contains(log.String(), urls[0]) {
				t.Errorf("log %q: the bad replica is not named as taken out", log.String())
			}
		})
	}
}

// answerAs rewrites every chat answer's model to name, as a replica that
// lists the job's model but serves another would answer.
func answerAs(name string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(&renameWriter{ResponseWriter: w, from: []byte(`"model":"test-model"`), to: []byte(`"model":"` + name + `"`)}, r)
		})
	}
}

type renameWriter struct {
	http.ResponseWriter
	from, to []byte
}

func (w *renameWriter) Write(p []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(p, w.from, w.to)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *renameWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// syncWriter serializes writes from the run's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestOneReplicaAnswersAsAnotherModel: with one endpoint that answers as
// another model, no answer is kept: each prompt fails with the replica and
// both models named.
func TestOneReplicaAnswersAsAnotherModel(t *testing.T) {
	rep := startReplica(t, mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 20, Seed: 1}), answerAs("evil-model"))
	stats := runstats.NewStats(nil)
	eo := testOptions(4)
	eo.Stream = true
	eo.Retry.MaxAttempts = 2
	client := wire.New(wire.Options{BaseURL: rep.url()})
	eo.Endpoints = []Endpoint{{URL: rep.url(), Client: client}}
	eng, err := New(client, stats, eo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	sum, err := eng.Run(context.Background(), newSliceSource(numberedIDs(5)...), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if sum.Written != 0 || sum.Failed != 5 {
		t.Fatalf("written %d, failed %d; want 0 and 5", sum.Written, sum.Failed)
	}
	errs := readJSONL[sink.ErrorRecord](t, dir, "errors")
	for _, e := range errs {
		if e.Cause != wire.CauseModel || !strings.Contains(e.Message, rep.url()) || !strings.Contains(e.Message, `"evil-model"`) || !strings.Contains(e.Message, `"test-model"`) {
			t.Errorf("error record %+v: want cause %s naming the replica and both models", e, wire.CauseModel)
		}
	}
}

// TestLateJoinerDownHasAReason: a replica that does not answer at start is
// shown down with what its probe said, not a bare "down".
func TestLateJoinerDownHasAReason(t *testing.T) {
	good := startReplica(t, mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 20, Seed: 1}), func(h http.Handler) http.Handler { return h })
	urls := []string{good.url(), "http://" + deadAddr(t) + "/v1"}
	stats := runstats.NewStats(nil)
	stats.SetEndpoints(urls)
	eo := testOptions(4)
	for _, u := range urls {
		eo.Endpoints = append(eo.Endpoints, Endpoint{URL: u, Client: wire.New(wire.Options{BaseURL: u})})
	}
	eng, err := New(eo.Endpoints[0].Client, stats, eo)
	if err != nil {
		t.Fatal(err)
	}
	out := openSink(t, t.TempDir())
	sum, err := eng.Run(context.Background(), newSliceSource(numberedIDs(40)...), out)
	if err != nil {
		t.Fatal(err)
	}
	snap := stats.Snapshot()
	_ = out.Close()
	stats.Stop()
	if sum.Written != 40 {
		t.Fatalf("written %d of 40", sum.Written)
	}
	late := snap.Endpoints[1]
	if late.State == runstats.EndpointUp || !strings.Contains(late.Reason, "refused") {
		t.Errorf("the dead replica shown %s with reason %q, want down saying its connection is refused", late.State, late.Reason)
	}
}

// runEveryRow runs rows numbered ids through eng into out, within limit,
// and fails the test unless every one is written and none failed; it
// returns the figures as the run ended, out closed and stats stopped.
func runEveryRow(t *testing.T, eng *Engine, stats *runstats.Stats, out *sink.Sink, rows int, limit time.Duration) runstats.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(numberedIDs(rows)...), out)
	if err != nil {
		t.Fatal(err)
	}
	snap := stats.Snapshot()
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	stats.Stop()
	if sum.Written != rows || sum.Failed != 0 {
		t.Fatalf("written %d, failed %d; want %d and 0", sum.Written, sum.Failed, rows)
	}
	return snap
}
