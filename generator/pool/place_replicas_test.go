package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// words is a text of n words, distinct per tag.
func words(tag string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = tag + strconv.Itoa(i)
	}
	return strings.Join(w, " ")
}

// runOnReplicas runs prompts against three mock replicas that each keep a
// prefix cache and returns their stats.
// tune, when not nil, sets the run's options; wrap, when not nil, wraps
// each replica's handler.
func runOnReplicas(t *testing.T, prompts []dataset.Prompt, samples int, tune func(*Options), wrap func(http.Handler) http.Handler) ([]mockserver.Stats, runstats.Snapshot) {
	t.Helper()
	if wrap == nil {
		wrap = func(h http.Handler) http.Handler { return h }
	}
	const conc = 12
	opts := mockserver.Options{Model: "test-model", MeanTokens: 8, TokenDelay: 100 * time.Microsecond, Seed: 5, PrefixCache: 4096}
	reps := make([]*replica, 3)
	targets := make([]Endpoint, 3)
	urls := make([]string, 3)
	for i := range reps {
		reps[i] = startReplica(t, mockserver.New(opts), wrap)
		urls[i] = reps[i].url()
		targets[i] = Endpoint{URL: urls[i], Client: wire.New(wire.Options{BaseURL: urls[i], MaxConns: conc})}
	}
	stats := runstats.NewStats(nil)
	stats.SetEndpoints(urls)
	eo := testOptions(conc)
	eo.Endpoints = targets
	eo.Sampling.Samples = samples
	if tune != nil {
		tune(&eo)
	}
	eng, err := New(targets[0].Client, stats, eo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sum, err := eng.Run(ctx, &sliceSource{prompts: prompts}, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	snap := stats.Snapshot()
	stats.Stop()
	if want := len(prompts) * samples; sum.Written != want || sum.Failed != 0 {
		t.Fatalf("written %d, failed %d; want %d and 0", sum.Written, sum.Failed, want)
	}
	st := make([]mockserver.Stats, len(reps))
	for i, r := range reps {
		st[i] = r.m.Stats()
	}
	return st, snap
}

// judgePrefill checks the prefill the replicas computed against least, the
// least any routing could (each prefix once), at most 1.15x, and that
// every replica answered at least 20% of the requests.
//
// The client's estimate of the share of prompt tokens its placement sent
// where their leading messages had gone must come within 0.1 of the
// replicas' own hit rate (it counts bytes, they count words).
func judgePrefill(t *testing.T, st []mockserver.Stats, snap runstats.Snapshot, least int64) {
	t.Helper()
	var queried, hit, placed, held int64
	for _, s := range st {
		queried += s.PrefixQueries
		hit += s.PrefixHits
	}
	for _, e := range snap.Endpoints {
		placed += e.PlacedPrompt
		held += e.PlacedHeld
	}
	rate, est := float64(hit)/float64(queried), float64(held)/float64(max(placed, 1))
	t.Logf("hit rate %.3f, the client's estimate %.3f", rate, est)
	if placed == 0 || est < rate-0.1 || est > rate+0.1 {
		t.Errorf("the client's estimate %.3f (of %d prompt tokens) is not within 0.1 of the replicas' hit rate %.3f", est, placed, rate)
	}
	var computed, requests int64
	for _, s := range st {
		computed += s.PrefixQueries - s.PrefixHits
		requests += s.Completed
	}
	ratio := float64(computed) / float64(least)
	t.Logf("prefill computed %d over the least %d: %.3fx; answers per replica %d, %d, %d", computed, least, ratio, st[0].Completed, st[1].Completed, st[2].Completed)
	if ratio > 1.15 {
		t.Errorf("prefill computed %.3fx the least, want at most 1.15x", ratio)
	}
	for i, s := range st {
		if 5*s.Completed < requests {
			t.Errorf("replica %d answered %d of %d requests, under 20%%", i, s.Completed, requests)
		}
	}
}

// 300 prompts under six shared system prompts (a long instruction, a short
// question): each system prompt computed on as few replicas as the load
// allows.
func TestPlaceSixSystemPrompts(t *testing.T) {
	t.Parallel()
	const rows, sysWords, userWords = 300, 400, 20
	prompts := make([]dataset.Prompt, rows)
	for i := range prompts {
		prompts[i] = dataset.Prompt{ID: strconv.Itoa(i), Index: int64(i), Source: "test", Messages: []chat.Message{
			{Role: "system", Content: words("s"+strconv.Itoa(i%6)+"_", sysWords)},
			{Role: "user", Content: words("u"+strconv.Itoa(i)+"_", userWords)},
		}}
	}
	st, snap := runOnReplicas(t, prompts, 1, nil, nil)
	judgePrefill(t, st, snap, 6*sysWords+rows*(sysWords+userWords)-rows*sysWords)
}

// Four samples of one prompt: the prompt computed once, where its first
// sample went.
func TestPlaceFourSamples(t *testing.T) {
	t.Parallel()
	const rows, promptWords = 90, 300
	prompts := make([]dataset.Prompt, rows)
	for i := range prompts {
		prompts[i] = dataset.Prompt{ID: strconv.Itoa(i), Index: int64(i), Source: "test", Messages: []chat.Message{
			{Role: "user", Content: words("p"+strconv.Itoa(i)+"_", promptWords)},
		}}
	}
	st, snap := runOnReplicas(t, prompts, 4, nil, nil)
	judgePrefill(t, st, snap, rows*promptWords)
}

// leastPrefill is the prefill of requests (each its messages) on one
// replica that keeps every prefix: each request computes only what
// follows its longest run of leading messages an earlier request had,
// counted in words as the mock counts tokens.
type leastPrefill struct {
	mu    sync.Mutex
	seen  map[uint64]bool
	total int64
}

func (l *leastPrefill) add(msgs []chat.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	chain := chainOf(msgs)
	n, hit := 0, 0
	for i, m := range msgs {
		n += len(strings.Fields(m.Content))
		if l.seen[chain.hash[i]] {
			hit = n
		}
	}
	for _, h := range chain.hash {
		l.seen[h] = true
	}
	l.total += int64(max(n, 1) - hit)
}

// tap records each chat request's messages into l, then serves it.
func (l *leastPrefill) tap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			var req struct {
				Messages []chat.Message `json:"messages"`
			}
			if json.Unmarshal(body, &req) == nil {
				l.add(req.Messages)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// Whole conversations (turns: all, 120 of four turns): each turn goes
// where its earlier turns went.
func TestPlaceWholeConversations(t *testing.T) {
	t.Parallel()
	const rows, turns = 120, 4
	prompts := make([]dataset.Prompt, rows)
	for i := range prompts {
		var conv []chat.Message
		for k := range turns {
			conv = append(conv,
				chat.Message{Role: "user", Content: words("c"+strconv.Itoa(i)+"t"+strconv.Itoa(k)+"_", 60)},
				chat.Message{Role: "assistant", Content: "earlier answer"})
		}
		prompts[i] = dataset.Prompt{ID: strconv.Itoa(i), Index: int64(i), Source: "test", Messages: conv[:1], Conversation: conv}
	}
	least := &leastPrefill{seen: map[uint64]bool{}}
	st, snap := runOnReplicas(t, prompts, 1, func(o *Options) { o.Prompt = job.Prompting{Turns: job.TurnsAll} }, least.tap)
	judgePrefill(t, st, snap, least.total)
}
