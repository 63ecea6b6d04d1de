package pool

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
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
func runOnReplicas(t *testing.T, prompts []dataset.Prompt, samples int) []mockserver.Stats {
	t.Helper()
	const conc = 12
	opts := mockserver.Options{Model: "test-model", MeanTokens: 8, TokenDelay: 100 * time.Microsecond, Seed: 5, PrefixCache: 4096}
	reps := make([]*replica, 3)
	targets := make([]Endpoint, 3)
	urls := make([]string, 3)
	for i := range reps {
		reps[i] = startReplica(t, mockserver.New(opts), func(h http.Handler) http.Handler { return h })
		urls[i] = reps[i].url()
		targets[i] = Endpoint{URL: urls[i], Client: wire.New(wire.Options{BaseURL: urls[i], MaxConns: conc})}
	}
	stats := runstats.NewStats(nil)
	stats.SetEndpoints(urls)
	eo := testOptions(conc)
	eo.Endpoints = targets
	eo.Sampling.Samples = samples
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
	stats.Stop()
	if want := len(prompts) * samples; sum.Written != want || sum.Failed != 0 {
		t.Fatalf("written %d, failed %d; want %d and 0", sum.Written, sum.Failed, want)
	}
	st := make([]mockserver.Stats, len(reps))
	for i, r := range reps {
		st[i] = r.m.Stats()
	}
	return st
}

// judgePrefill checks the prefill the replicas computed against least, the
// least any routing could (each prefix once), at most 1.15x, and that
// every replica answered at least 20% of the requests.
func judgePrefill(t *testing.T, st []mockserver.Stats, least int64) {
	t.Helper()
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
		prompts[i] = dataset.Prompt{ID: strconv.Itoa(i), Index: int64(i), Source: "test", Messages: []dataset.Message{
			{Role: "system", Content: words("s"+strconv.Itoa(i%6)+"_", sysWords)},
			{Role: "user", Content: words("u"+strconv.Itoa(i)+"_", userWords)},
		}}
	}
	st := runOnReplicas(t, prompts, 1)
	judgePrefill(t, st, 6*sysWords+rows*(sysWords+userWords)-rows*sysWords)
}

// Four samples of one prompt: the prompt computed once, where its first
// sample went.
func TestPlaceFourSamples(t *testing.T) {
	t.Parallel()
	const rows, promptWords = 90, 300
	prompts := make([]dataset.Prompt, rows)
	for i := range prompts {
		prompts[i] = dataset.Prompt{ID: strconv.Itoa(i), Index: int64(i), Source: "test", Messages: []dataset.Message{
			{Role: "user", Content: words("p"+strconv.Itoa(i)+"_", promptWords)},
		}}
	}
	st := runOnReplicas(t, prompts, 4)
	judgePrefill(t, st, rows*promptWords)
}
