package pool

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// byKey counts the records of each key, failing on an incomplete one.
func byKey(t *testing.T, recs []sink.Record) map[sink.Key]int {
	t.Helper()
	seen := map[sink.Key]int{}
	for _, r := range recs {
		if r.Content == "" || r.FinishReason == "" {
			t.Fatalf("incomplete record %s/%d: %+v", r.ID, r.Sample, r)
		}
		seen[sink.Key{ID: r.ID, Sample: r.Sample}]++
	}
	return seen
}

// nCompleter records the n of every request it passes on.
type nCompleter struct {
	Completer
	mu sync.Mutex
	ns map[string][]int // the prompt's last message: each request's n
}

func (c *nCompleter) Complete(ctx context.Context, req wire.Request, onDelta func(int)) (wire.Response, error) {
	c.mu.Lock()
	if c.ns == nil {
		c.ns = map[string][]int{}
	}
	p := req.Messages[len(req.Messages)-1].Content
	c.ns[p] = append(c.ns[p], max(req.N, 1))
	c.mu.Unlock()
	return c.Completer.Complete(ctx, req, onDelta)
}

func nOptions(conc, samples int, stream bool) Options {
	opts := testOptions(conc)
	opts.Sampling.Samples, opts.Sampling.Temperature = samples, 1
	opts.Stream, opts.NPerRequest = stream, true
	return opts
}

// A prompt's samples are one request carrying n: the mock sees one request
// a row, and each choice is a record of its own, the prompt's tokens
// counted on one of them; with n_per_request off, one request a sample.
func TestNOneRequestPerPrompt(t *testing.T) {
	const rows, samples = 12, 4
	for _, stream := range []bool{false, true} {
		for _, together := range []bool{true, false} {
			m := mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 12, Seed: 9})
			ts := httptest.NewServer(m)
			opts := nOptions(3, samples, stream)
			opts.NPerRequest = together
			eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1"}), runstats.NewStats(nil), opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := openSink(t, dir)
			sum, err := eng.Run(context.Background(), newSliceSource(numberedIDs(rows)...), out)
			ts.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			want := int64(rows)
			if !together {
				want = rows * samples
			}
			if got := m.Stats().Requests; got != want {
				t.Errorf("stream %v, together %v: the mock served %d requests, want %d", stream, together, got, want)
			}
			recs := shardRecords(t, dir)
			seen := byKey(t, recs)
			if len(seen) != rows*samples || len(recs) != rows*samples || sum.Written != rows*samples {
				t.Fatalf("stream %v, together %v: %d records of %d keys (summary %d), want %d once each", stream, together, len(recs), len(seen), sum.Written, rows*samples)
			}
			if !together {
				continue
			}
			contents := map[string]map[string]bool{}
			promptOn := map[string]int{}
			var completion int64
			for _, r := range recs {
				if contents[r.ID] == nil {
					contents[r.ID] = map[string]bool{}
				}
				contents[r.ID][r.Reasoning+"|"+r.Content] = true
				if r.PromptTokens > 0 {
					promptOn[r.ID]++
				}
				completion += int64(r.CompletionTokens)
				if r.Attempts != 1 || len(r.Messages) == 0 {
					t.Errorf("record %s/%d: attempts %d, %d messages", r.ID, r.Sample, r.Attempts, len(r.Messages))
				}
			}
			for id, c := range contents {
				if len(c) != samples || promptOn[id] != 1 {
					t.Errorf("stream %v: id %s has %d distinct answers, the prompt counted on %d records", stream, id, len(c), promptOn[id])
				}
			}
			if got := m.Stats().GenerationTokens; completion != got {
				t.Errorf("stream %v: the records count %d completion tokens, the mock generated %d", stream, completion, got)
			}
		}
	}
}

// A server that ignores n is found at its first answer, said once, and
// its one choice kept: each row costs exactly its samples in requests
// (the one that carried n, then the rest alone), none lost, none twice.
func TestNIgnoredServer(t *testing.T) {
	const rows, samples = 8, 3
	for _, stream := range []bool{false, true} {
		m := mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 12, Seed: 9, IgnoreN: true})
		ts := httptest.NewServer(m)
		opts := nOptions(2, samples, stream)
		var log bytes.Buffer
		opts.Log = &syncWriter{w: &log}
		nc := &nCompleter{Completer: wire.New(wire.Options{BaseURL: ts.URL + "/v1"})}
		eng, err := New(nc, runstats.NewStats(nil), opts)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		out := openSink(t, dir)
		_, err = eng.Run(context.Background(), newSliceSource(numberedIDs(rows)...), out)
		ts.Close()
		if err != nil {
			t.Fatal(err)
		}
		out.Close()
		if got := m.Stats().Requests; got != rows*samples {
			t.Errorf("stream %v: %d requests, want %d: the one choice answered was asked again or lost", stream, got, rows*samples)
		}
		if seen := byKey(t, shardRecords(t, dir)); len(seen) != rows*samples {
			t.Errorf("stream %v: %d keys written, want %d", stream, len(seen), rows*samples)
		}
		if n := strings.Count(log.String(), "ignores n"); n != 1 {
			t.Errorf("stream %v: said %d times, want once: %q", stream, n, log.String())
		}
		// After the note, every request is one sample's: at most the
		// requests started before it carried n (two slots).
		carried := 0
		for _, ns := range nc.ns {
			for _, n := range ns {
				if n > 1 {
					carried++
				}
			}
		}
		if carried < 1 || carried > 3 {
			t.Errorf("stream %v: %d requests carried n, want the first few only", stream, carried)
		}
	}
}

// A resume asks only a prompt's samples not held, in one request with the
// smaller n (or alone, when one is left), and writes each key once.
func TestNResumeAsksTheMissing(t *testing.T) {
	const rows, samples = 5, 4
	dir := t.TempDir()
	out := openSink(t, dir)
	held := map[string][]int{"0": {1, 3}, "1": {2}, "2": {0, 1, 2}, "3": {0, 1, 2, 3}}
	for id, ss := range held {
		for _, s := range ss {
			if err := out.Write(&sink.Record{ID: id, Sample: s, Content: "held", FinishReason: "stop", Model: "test-model", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	m := mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 12, Seed: 9})
	ts := httptest.NewServer(m)
	defer ts.Close()
	nc := &nCompleter{Completer: wire.New(wire.Options{BaseURL: ts.URL + "/v1"})}
	eng, err := New(nc, runstats.NewStats(nil), nOptions(2, samples, true))
	if err != nil {
		t.Fatal(err)
	}
	out = openSink(t, dir)
	sum, err := eng.Run(context.Background(), newSliceSource(numberedIDs(rows)...), out)
	if err != nil {
		t.Fatal(err)
	}
	out.Close()
	want := map[string][]int{"prompt 0": {2}, "prompt 1": {3}, "prompt 2": {1}, "prompt 4": {4}}
	if len(nc.ns) != len(want) {
		t.Errorf("asked %v, want %v", nc.ns, want)
	}
	for p, ns := range want {
		if got := nc.ns[p]; len(got) != 1 || got[0] != ns[0] {
			t.Errorf("%s asked with n %v, want %v", p, got, ns)
		}
	}
	seen := byKey(t, shardRecords(t, dir))
	for id := range rows {
		for s := range samples {
			if k := (sink.Key{ID: numberedIDs(rows)[id], Sample: s}); seen[k] != 1 {
				t.Errorf("key %v written %d times", k, seen[k])
			}
		}
	}
	if sum.Skipped != 10 || sum.Written != 10 {
		t.Errorf("skipped %d, written %d; want 10 held, 10 new", sum.Skipped, sum.Written)
	}
}

// A run cut while n-requests are in flight writes none of their samples
// (a request's records are handed over only once it is whole), and the
// resume writes every key exactly once.
func TestNCutDuringRequest(t *testing.T) {
	const rows, samples, conc = 10, 3, 3
	m := mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 40, TokenDelay: 2 * time.Millisecond, Seed: 9})
	ts := httptest.NewServer(m)
	defer ts.Close()
	client := wire.New(wire.Options{BaseURL: ts.URL + "/v1"})
	dir := t.TempDir()
	out := openSink(t, dir)
	stats := runstats.NewStats(nil)
	eng, err := New(client, stats, nOptions(conc, samples, true))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := startRun(ctx, eng, newSliceSource(numberedIDs(rows)...), out)
	// Cut once some prompts are written and the next ones are streaming.
	waitFor(t, 30*time.Second, "records written and requests in flight", func() bool {
		s := m.Stats()
		return stats.Snapshot().Done >= samples && s.Requests >= s.Completed+1
	})
	cancel()
	<-r.done
	if r.err != nil {
		t.Fatal(r.err)
	}
	out.Close()
	first := byKey(t, shardRecords(t, dir))
	perID := map[string]int{}
	for k, n := range first {
		if n != 1 {
			t.Fatalf("key %v written %d times", k, n)
		}
		perID[k.ID]++
	}
	for id, n := range perID {
		if n != samples {
			t.Errorf("id %s: %d of its %d samples written by the cut run: a request's choices are all or none", id, n, samples)
		}
	}
	if len(first) == rows*samples {
		t.Fatalf("the cut came after every record: the test cut nothing")
	}
	before := m.Stats().Requests
	eng, _ = New(client, runstats.NewStats(nil), nOptions(conc, samples, true))
	out = openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource(numberedIDs(rows)...), out); err != nil {
		t.Fatal(err)
	}
	out.Close()
	seen := byKey(t, shardRecords(t, dir))
	if len(seen) != rows*samples {
		t.Errorf("%d keys after the resume, want %d", len(seen), rows*samples)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("key %v written %d times", k, n)
		}
	}
	if got, want := m.Stats().Requests-before, int64(rows-len(perID)); got != want {
		t.Errorf("the resume sent %d requests, want one per prompt left: %d", got, want)
	}
}

// A failed n-request is retried as one sample's is; one that fails for
// good writes the same error for each of its samples, once.
func TestNRetriedAndFailed(t *testing.T) {
	const rows, samples = 10, 3
	for _, failAll := range []bool{false, true} {
		rate := 0.4
		if failAll {
			rate = 1
		}
		m := mockserver.New(mockserver.Options{Model: "test-model", MeanTokens: 12, Seed: 9, Rate500: rate})
		ts := httptest.NewServer(m)
		opts := nOptions(2, samples, true)
		opts.Retry.MaxAttempts = 20
		if failAll {
			opts.Retry.MaxAttempts = 2
		}
		eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1"}), runstats.NewStats(nil), opts)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		out := openSink(t, dir)
		sum, err := eng.Run(context.Background(), newSliceSource(numberedIDs(rows)...), out)
		ts.Close()
		if err != nil {
			t.Fatal(err)
		}
		out.Close()
		if failAll {
			if sum.Failed != rows*samples || sum.Written != 0 {
				t.Errorf("failed %d, written %d; want every key failed once (%d)", sum.Failed, sum.Written, rows*samples)
			}
			if got := m.Stats().Requests; got != rows*2 {
				t.Errorf("%d requests, want 2 attempts of each prompt's one request: %d", got, rows*2)
			}
			continue
		}
		recs := shardRecords(t, dir)
		seen := byKey(t, recs)
		retried := 0
		for _, r := range recs {
			if r.Attempts > 1 {
				retried++
			}
		}
		if len(seen) != rows*samples || len(recs) != rows*samples || sum.Failed != 0 {
			t.Errorf("%d records of %d keys, %d failed; want %d once each", len(recs), len(seen), sum.Failed, rows*samples)
		}
		if retried == 0 || m.Stats().Requests <= rows {
			t.Errorf("%d requests for %d prompts, %d records retried: the mock's 500s were not met", m.Stats().Requests, rows, retried)
		}
	}
}
