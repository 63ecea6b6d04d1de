package generator

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
		eng, err := newEngine(newWireClient(wireOptions{BaseURL: ts.URL + "/v1", MaxConns: conc}), NewStats(nil), testOptions(conc))
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
