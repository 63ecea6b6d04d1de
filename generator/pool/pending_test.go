package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/sink"
)

// TestRepeatedIDsFoundInTheSink: with a sink that says what the run wrote,
// the producer keeps no set of its own; a repeated id is found pending
// while its first copy is in flight, and in the sink once that copy's
// record or error record is written. Each key is asked once, and nothing
// stays pending.
func TestRepeatedIDsFoundInTheSink(t *testing.T) {
	srv := &countingServer{}
	// "x" is refused for good (a 400): its error record, not a record,
	// must keep its copies from being asked.
	var refused atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if strings.Contains(string(body), `"prompt x"`) {
				refused.Add(1)
				http.Error(w, `{"object":"error","message":"no","code":400}`, http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	// One slot: each copy comes after its first copy's result was written
	// (seen by the sink); four slots: copies meet their first in flight.
	for _, conc := range []int{1, 4} {
		refused.Store(0)
		before := srv.requests.Load()
		ids := []string{"a", "x", "b", "a", "x", "c", "b", "a", "x", "c"}
		dir := t.TempDir()
		out := openSink(t, dir)
		eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: conc}), runstats.NewStats(nil), testOptions(conc))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sum, err := eng.Run(ctx, newSliceSource(ids...), out)
		cancel()
		if err != nil {
			t.Fatalf("concurrency %d: Run: %v", conc, err)
		}
		for _, id := range []string{"a", "b", "c", "x"} {
			k := sink.Key{ID: id}
			if !out.Seen(k) {
				t.Errorf("concurrency %d: the sink has not seen %s", conc, id)
			}
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		if got := srv.requests.Load() - before; got != 3 {
			t.Errorf("concurrency %d: %d answered requests, want 3 (a, b, c once each)", conc, got)
		}
		if n := refused.Load(); n != 1 {
			t.Errorf("concurrency %d: x asked %d times, want once", conc, n)
		}
		if sum.Written != 3 || sum.Failed != 1 || sum.Duplicates != 6 {
			t.Errorf("concurrency %d: summary %+v, want 3 written, 1 failed, 6 repeats", conc, sum)
		}
		if n := eng.pending.len(); n != 0 {
			t.Errorf("concurrency %d: %d keys still pending after the run", conc, n)
		}
		if seen := readIDs(t, dir); len(seen) != 3 || seen["a"] != 1 || seen["b"] != 1 || seen["c"] != 1 {
			t.Errorf("concurrency %d: records on disk %v", conc, seen)
		}
	}
}

// TestRepeatedIDsUnderLoad: 3,000 rows drawn from 300 ids, 32 in flight,
// answers that take random short times and some refused for good: every
// id is asked exactly once (its repeats meet it pending, or seen in the
// sink as a record or an error record), written once, and nothing stays
// pending. Run under -race, it also holds the writer's and the
// producer's use of the sink's keys apart.
func TestRepeatedIDsUnderLoad(t *testing.T) {
	const rows, distinct, conc = 3000, 300, 32
	var asked sync.Map // prompt -> *atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"test-model","object":"model"}]}`)
			return
		}
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		prompt := body.Messages[0].Content
		n, _ := asked.LoadOrStore(prompt, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		var id int
		fmt.Sscanf(prompt, "prompt id-%d", &id)
		time.Sleep(time.Duration(id%7) * 100 * time.Microsecond)
		if id%10 == 3 {
			http.Error(w, `{"object":"error","message":"refused","code":400}`, http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"test-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"answer %d","reasoning":"because %d"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, id, id)
	}))
	defer ts.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	ids := make([]string, rows)
	for i := range ids {
		// The first 300 rows name every id once, in a shuffled order; the
		// rest repeat them, some while the first copy is in flight.
		if i < distinct {
			ids[i] = fmt.Sprintf("id-%d", i)
		} else {
			ids[i] = fmt.Sprintf("id-%d", rng.IntN(distinct))
		}
	}
	rng.Shuffle(distinct, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	dir := t.TempDir()
	out := openSink(t, dir)
	eng, err := New(wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: conc}), runstats.NewStats(nil), testOptions(conc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := eng.Run(ctx, newSliceSource(ids...), out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	refused := distinct / 10
	var n int
	asked.Range(func(k, v any) bool {
		n++
		if c := v.(*atomic.Int64).Load(); c != 1 {
			t.Errorf("%s asked %d times", k, c)
		}
		return true
	})
	if n != distinct {
		t.Errorf("%d distinct prompts asked, want %d", n, distinct)
	}
	if sum.Written != distinct-refused || sum.Failed != refused || sum.Duplicates != rows-distinct {
		t.Errorf("summary %+v: want %d written, %d failed, %d repeats", sum, distinct-refused, refused, rows-distinct)
	}
	if p := eng.pending.len(); p != 0 {
		t.Errorf("%d keys still pending", p)
	}
	for id, c := range readIDs(t, dir) {
		if c != 1 {
			t.Errorf("%s on disk %d times", id, c)
		}
	}
}
