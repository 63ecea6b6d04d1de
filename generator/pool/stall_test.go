package pool

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/mockserver"
)

// mockOptions ask the mock's model, with fast retries.
func mockOptions(concurrency, maxAttempts int) Options {
	o := retryOptions(true, maxAttempts)
	o.Concurrency = concurrency
	o.Sampling.Model = mockserver.DefaultModel
	return o
}

// TestStallRetried: streams that go silent after their first tokens are
// cut by endpoint.stall_timeout and retried as cause "stall", long before
// endpoint.timeout (10 minutes here: the test's own 30 s bound would end
// the run first, and every assertion would fail, if only the timeout cut
// them).
func TestStallRetried(t *testing.T) {
	t.Run("every request stalls", func(t *testing.T) {
		m := mockserver.New(mockserver.Options{MeanTokens: 16, StallRate: 1, StallAfter: 3})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		dir := t.TempDir()
		wo := wire.Options{BaseURL: ts.URL + "/v1", Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, dir, mockOptions(3, 2), []string{"a", "b", "c"})
		if sum.Written != 0 || sum.Failed != 3 {
			t.Fatalf("written %d failed %d, want 0 and 3", sum.Written, sum.Failed)
		}
		for _, e := range readJSONL[struct {
			ID       string `json:"id"`
			Cause    string `json:"cause"`
			Attempts int    `json:"attempts"`
			Message  string `json:"message"`
		}](t, dir, "errors") {
			if e.Cause != wire.CauseStall || e.Attempts != 2 || !strings.Contains(e.Message, "endpoint.stall_timeout") {
				t.Errorf("error record %+v: want cause stall, 2 attempts, a message naming endpoint.stall_timeout", e)
			}
		}
		snap := stats.Snapshot()
		if got := snap.RetriesByCause[wire.CauseStall]; got != 3 {
			t.Errorf("retries by cause %v: want stall 3", snap.RetriesByCause)
		}
		if got := snap.ErrorsByCause[wire.CauseStall]; got != 3 {
			t.Errorf("errors by cause %v: want stall 3", snap.ErrorsByCause)
		}
		if got := m.Stats().Stalled; got != 6 {
			t.Errorf("the mock stalled %d requests, want 6 (3 keys x 2 attempts)", got)
		}
	})
	t.Run("some stall, all are answered", func(t *testing.T) {
		// One request in flight: the mock's draws land on the same
		// requests on every run.
		m := mockserver.New(mockserver.Options{MeanTokens: 16, StallRate: 0.3, StallAfter: 2, Seed: 3})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		dir := t.TempDir()
		wo := wire.Options{BaseURL: ts.URL + "/v1", Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, dir, mockOptions(1, 8), numberedIDs(12))
		if sum.Written != 12 || sum.Failed != 0 {
			t.Fatalf("written %d failed %d, want 12 and 0", sum.Written, sum.Failed)
		}
		stalled := m.Stats().Stalled
		if stalled == 0 {
			t.Fatal("the mock stalled no request: the test shows nothing")
		}
		if got := stats.Snapshot().RetriesByCause[wire.CauseStall]; got != stalled {
			t.Errorf("retries by cause stall %d, want the mock's %d stalls", got, stalled)
		}
		attempts := 0
		for _, r := range recordsByID(t, dir) {
			attempts += r.Attempts
		}
		if want := 12 + int(stalled); attempts != want {
			t.Errorf("records' attempts sum to %d, want 12 + %d stalls", attempts, stalled)
		}
	})
	t.Run("off", func(t *testing.T) {
		// stall_timeout 0: the only bound is the request's timeout.
		m := mockserver.New(mockserver.Options{MeanTokens: 16, StallRate: 1, StallAfter: 3})
		ts := httptest.NewServer(m)
		t.Cleanup(ts.Close)
		wo := wire.Options{BaseURL: ts.URL + "/v1", Timeout: 200 * time.Millisecond}
		sum, stats := runEngineWith(t, wo, t.TempDir(), mockOptions(1, 1), []string{"a"})
		if sum.Failed != 1 || stats.Snapshot().ErrorsByCause[wire.CauseTimeout] != 1 {
			t.Errorf("failed %d, errors by cause %v: want one timeout", sum.Failed, stats.Snapshot().ErrorsByCause)
		}
	})
}

// silentListener accepts connections and never reads nor writes: a raw TCP
// black hole in the place of a replica.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// TestSilentReplicasAreRoutedAround: beside a well replica, one that
// accepts connections and never answers and one whose handler lists its
// model and never writes a POST's headers. Their streams, headerless a
// stall_timeout while the well one answers, are their failures: each is
// sent to the well one uncharged (every record at its first attempt), both
// silent replicas are taken out naming stall, and the run ends with every
// row written, not at endpoint.timeout.
func TestSilentReplicasAreRoutedAround(t *testing.T) {
	t.Parallel()
	const rows, conc = 60, 6
	// The well one holds its first two streams, sending their headers and
	// keep-alive comments, until both silent ones are out, so the run
	// cannot end before they are (30 s at most: then the test fails on
	// their state).
	var ledgers []*runstats.Endpoint
	var held atomic.Int64
	hold := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/chat/completions") && held.Add(1) <= 2 {
				// Read before any write: net/http may refuse a body
				// read after the headers went.
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				for deadline := time.Now().Add(30 * time.Second); !(ledgers[1].Down() && ledgers[2].Down()) && time.Now().Before(deadline); {
					_, _ = w.Write([]byte(": keep-alive\n\n"))
					w.(http.Flusher).Flush()
					time.Sleep(10 * time.Millisecond)
				}
				w = headersSent{w}
			}
			h.ServeHTTP(w, r)
		})
	}
	well := startReplica(t, mockserver.New(mockserver.Options{MeanTokens: 8, Seed: 1}), hold)
	quit := make(chan struct{})
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"` + mockserver.DefaultModel + `","object":"model"}]}`))
			return
		}
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(mute.Close)
	t.Cleanup(func() { close(quit) }) // first: the test's end frees the handlers
	urls := []string{well.url(), silentListener(t), mute.URL + "/v1"}
	group := wire.NewReplicas()
	targets := make([]Endpoint, len(urls))
	for i, u := range urls {
		// The silent replicas' loss is judged by their own clients'
		// stall timeout; the well one's is long, so that a gap in its
		// streams on a loaded machine is never cut as a stall (which,
		// once the silent ones are out, would be the prompt's attempt).
		stall := 200 * time.Millisecond
		if i == 0 {
			stall = 10 * time.Minute
		}
		targets[i] = Endpoint{URL: u, Client: wire.New(wire.Options{BaseURL: u, MaxConns: conc, Timeout: 10 * time.Minute, StallTimeout: stall, Replicas: group})}
	}
	stats := runstats.NewStats(nil)
	stats.SetEndpoints(urls)
	ledgers = stats.EndpointLedgers(len(urls))
	eo := mockOptions(conc, 2)
	eo.Sampling.MaxTokens = 8
	eo.Endpoints = targets
	eng, err := New(targets[0].Client, stats, eo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openRetrySink(t, dir)
	snap := runEveryRow(t, eng, stats, out, rows, 60*time.Second)
	for id, r := range recordsByID(t, dir) {
		if r.Attempts != 1 {
			t.Errorf("id %s: attempts %d, want 1: a silent replica's loss is not the prompt's", id, r.Attempts)
		}
	}
	if snap.RetriesByCause[wire.CauseStall] == 0 {
		t.Errorf("retries by cause %v: want the silent replicas' streams retried as stall", snap.RetriesByCause)
	}
	t.Logf("retries %v; endpoints %+v", snap.RetriesByCause, snap.Endpoints)
	for _, i := range []int{1, 2} {
		if ep := snap.Endpoints[i]; ep.State == runstats.EndpointUp || !strings.Contains(ep.Reason, wire.CauseStall) {
			t.Errorf("silent replica %d shown %s %q, want out naming stall", i, ep.State, ep.Reason)
		}
	}
}

// roundTripFunc is an http.RoundTripper of one function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// headersSent is a response whose headers were written: the handler's own
// are dropped.
type headersSent struct{ http.ResponseWriter }

func (w headersSent) WriteHeader(int) {}
func (w headersSent) Flush()          { w.ResponseWriter.(http.Flusher).Flush() }

// TestLoneSilentRequestMoves: one request in flight (concurrency 1) on a
// replica that lists the model and never sends a byte, beside a sound one
// with nothing to say because it holds nothing: the request moves there,
// uncharged, after a bounded wait (stall_timeout, a few before the sound one
// first answered), and every row is written at its first attempt; the run
// does not sit at endpoint.timeout.
func TestLoneSilentRequestMoves(t *testing.T) {
	t.Parallel()
	const rows = 20
	well := startReplica(t, mockserver.New(mockserver.Options{MeanTokens: 8, Seed: 1}), func(h http.Handler) http.Handler { return h })
	quit := make(chan struct{})
	var silentAsked atomic.Int64
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"` + mockserver.DefaultModel + `","object":"model"}]}`))
			return
		}
		silentAsked.Add(1)
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(mute.Close)
	t.Cleanup(func() { close(quit) })
	// The silent one first: the run's first request goes to it before
	// the sound one has said anything.
	urls := []string{mute.URL + "/v1", well.url()}
	group := wire.NewReplicas()
	targets := make([]Endpoint, len(urls))
	// What the client sent the silent one is counted as it goes out: on a
	// loaded machine a request can be cut (and moved) before the server
	// has read it, so silentAsked may be the fewer.
	var silentSent atomic.Int64
	for i, u := range urls {
		o := wire.Options{BaseURL: u, MaxConns: 1, Timeout: 10 * time.Minute, StallTimeout: 100 * time.Millisecond, Replicas: group}
		if i == 0 {
			tr := wire.NewTransport(1, nil)
			o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodPost {
					silentSent.Add(1)
				}
				return tr.RoundTrip(r)
			})}
		} else {
			o.StallTimeout = 10 * time.Minute // the sound one's gaps on a loaded machine are not stalls
		}
		targets[i] = Endpoint{URL: u, Client: wire.New(o)}
	}
	stats := runstats.NewStats(nil)
	stats.SetEndpoints(urls)
	eo := mockOptions(1, 2)
	eo.Sampling.MaxTokens = 8
	eo.Endpoints = targets
	eng, err := New(targets[0].Client, stats, eo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openRetrySink(t, dir)
	// The bound is the test's failure, not its measure: without the rule
	// the first request sits at endpoint.timeout (10 minutes).
	snap := runEveryRow(t, eng, stats, out, rows, 5*time.Minute)
	recs := recordsByID(t, dir)
	if len(recs) != rows {
		t.Fatalf("%d of %d rows written", len(recs), rows)
	}
	for id, r := range recs {
		if r.Attempts != 1 {
			t.Errorf("id %s: attempts %d, want 1: a silent replica's loss is not the prompt's", id, r.Attempts)
		}
	}
	if silentAsked.Load() == 0 || snap.RetriesByCause[wire.CauseStall] != silentSent.Load() {
		t.Errorf("the silent replica was sent %d requests (it read %d), retries for stall %d: want every one of them moved",
			silentSent.Load(), silentAsked.Load(), snap.RetriesByCause[wire.CauseStall])
	}
}
