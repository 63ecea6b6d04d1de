package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator"
	"github.com/synthgen/synthgen/internal/mockserver"
)

// fakeVLLM serves /metrics in vLLM's layout (two engines) with a
// generation counter that grows at rate tokens per second of real time,
// split between the engines.
type fakeVLLM struct {
	rate  float64
	start time.Time

	mu      sync.Mutex
	scrapes int
	down    bool
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.scrapes++
	down := f.down
	f.mu.Unlock()
	if r.URL.Path != "/metrics" || down {
		http.NotFound(w, r)
		return
	}
	gen := f.rate * time.Since(f.start).Seconds()
	fmt.Fprintf(w, `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 100.0
vllm:num_requests_running{engine="1",model_name="qwen"} 98.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 2.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.8
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.9
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} %s
vllm:generation_tokens_total{engine="1",model_name="qwen"} %s
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="qwen"} 1.7769301736865187e+09
vllm:generation_tokens_created{engine="1",model_name="qwen"} 1.7769301736865187e+09
`, strconv.FormatFloat(gen/2, 'g', -1, 64), strconv.FormatFloat(gen/2, 'g', -1, 64))
}

func runWatchCmd(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := newWatchCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// The reported tok/s is the server's true rate, within 5%.
func TestWatchRate(t *testing.T) {
	fake := &fakeVLLM{rate: 5000, start: time.Now()}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, target := range []string{srv.URL, srv.URL + "/v1", srv.URL + "/metrics"} {
		t.Run(strings.TrimPrefix(target, srv.URL), func(t *testing.T) {
			out, _, err := runWatchCmd(context.Background(), target, "--window", "1s")
			if err != nil {
				t.Fatal(err)
			}
			var tok float64
			if _, err := fmt.Sscanf(out, "%g tok/s", &tok); err != nil {
				t.Fatalf("output %q does not start with the tok/s: %v", out, err)
			}
			if tok < 4750 || tok > 5250 {
				t.Errorf("tok/s = %v, want 5000 ± 5%%", tok)
			}
			wantRest := " running 198 waiting 2 kv 85% preemptions 0 (1s window, " + srv.URL + "/metrics)\n"
			if !strings.HasSuffix(out, wantRest) {
				t.Errorf("output = %q, want it to end with %q", out, wantRest)
			}
		})
	}
}

func TestWatchFollowJSON(t *testing.T) {
	fake := &fakeVLLM{rate: 2000, start: time.Now()}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1700*time.Millisecond)
	defer cancel()
	out, _, err := runWatchCmd(ctx, srv.URL, "--follow", "--json", "--window", "400ms")
	if err != nil {
		t.Fatalf("--follow ended with %v, want a clean stop at Ctrl-C", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || len(lines) > 4 {
		t.Fatalf("got %d lines in 1.7 s at one per 400 ms:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var rec generator.ServerRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not JSON: %v: %s", err, l)
		}
		// Loose bounds: over a 400 ms window, tens of milliseconds of
		// scheduling delay on a loaded machine move the rate by 10%; the
		// accuracy of the rate is TestWatchRate's and
		// TestWatchMatchesMockTokenCount's business.
		if rec.GenTokPerS < 1500 || rec.GenTokPerS > 2500 || rec.Running != 198 || rec.KVCacheUsage == nil ||
			rec.URL != srv.URL+"/metrics" || rec.SpecAcceptanceRate != nil {
			t.Errorf("record = %+v", rec)
		}
	}
}

func TestWatchErrors(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "go_goroutines 12")
	}))
	defer other.Close()

	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
		hint     string
	}{
		{"no url", nil, exitUsage, "one URL", "synthgen watch http://"},
		{"not a url", []string{"ftp://localhost:8000"}, exitUsage, "want http(s)://", "server root"},
		{"bad window", []string{"http://127.0.0.1:1", "--window", "0s"}, exitUsage, "--window", "10s"},
		{"down", []string{downURL}, exitFailure, downURL + "/metrics", "is vLLM running?"},
		{"not vllm", []string{other.URL}, exitFailure, "no vLLM metrics", "not a vLLM /metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runWatchCmd(context.Background(), tc.args...)
			var ee *exitError
			if !errors.As(err, &ee) {
				t.Fatalf("err = %v, want an exitError", err)
			}
			if ee.code != tc.code || !strings.Contains(err.Error(), tc.contains) || !strings.Contains(ee.Hint(), tc.hint) {
				t.Errorf("err = %v (code %d, hint %q), want code %d containing %q, hint with %q",
					err, ee.code, ee.Hint(), tc.code, tc.contains, tc.hint)
			}
		})
	}
}

// Under --follow a server that goes away is reported once and waited for.
func TestWatchFollowSurvivesRestart(t *testing.T) {
	fake := &fakeVLLM{rate: 1000, start: time.Now()}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Down for a few scrapes after the first line, then back.
		time.Sleep(350 * time.Millisecond)
		fake.mu.Lock()
		fake.down = true
		fake.mu.Unlock()
		time.Sleep(700 * time.Millisecond)
		fake.mu.Lock()
		fake.down = false
		fake.mu.Unlock()
		time.Sleep(700 * time.Millisecond)
		cancel()
	}()
	out, errOut, err := runWatchCmd(ctx, srv.URL, "--follow", "--window", "200ms")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errOut, "404 Not Found"); n != 1 {
		t.Errorf("outage reported %d times, want once:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, "answers again") {
		t.Errorf("recovery not reported:\n%s", errOut)
	}
	if strings.Count(out, "tok/s") < 2 {
		t.Errorf("want lines before and after the outage:\n%s", out)
	}
}

// scrapeLog records the mock's own generated-token count at the moment each
// /metrics response is served, so the test's reference rate has the same
// window boundaries as the one watch computes.
type scrapeLog struct {
	next http.Handler
	mock *mockserver.Server

	mu  sync.Mutex
	at  []time.Time
	gen []int64
}

func (l *scrapeLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.next.ServeHTTP(w, r)
	if r.URL.Path == "/metrics" {
		// Taken as the response is out, when watch stamps its sample (it
		// takes the time once the response arrives): a slow first scrape
		// then shifts both windows alike.
		l.mu.Lock()
		l.at = append(l.at, time.Now())
		l.gen = append(l.gen, l.mock.Stats().GenerationTokens)
		l.mu.Unlock()
	}
}

// streamLoad keeps clients streaming chat completions from url, one after
// the other, until ctx ends.
func streamLoad(ctx context.Context, wg *sync.WaitGroup, client *http.Client, url string, clients int) {
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				body := fmt.Sprintf(`{"model":"mock-model","stream":true,"max_tokens":2000,`+
					`"messages":[{"role":"user","content":"client %d question %d"}]}`, i, j)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					continue // cancelled at the end of the test
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
}

// `synthgen watch` against the built-in mock under steady streaming load
// reports the tokens the mock generated per second over its window, within
// 5%: the rate a person reads is the server's own.
func TestWatchMatchesMockTokenCount(t *testing.T) {
	if testing.Short() {
		t.Skip("2 s of streaming load")
	}
	const clients = 64
	const tokenDelay = 10 * time.Millisecond // 64 streams: about 6400 tok/s
	mock := mockserver.New(mockserver.Options{TokenDelay: tokenDelay, MeanTokens: 400})
	log := &scrapeLog{next: mock, mock: mock}
	srv := httptest.NewServer(log)
	defer srv.Close()

	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	streamLoad(ctx, &wg, &http.Client{Transport: tr}, srv.URL, clients)

	// Every client's first token is out before the window opens: the rate
	// is steady over the whole of it.
	deadline := time.Now().Add(10 * time.Second)
	for mock.Stats().Running < clients {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d streams running after 10 s", mock.Stats().Running, clients)
		}
		time.Sleep(10 * time.Millisecond)
	}

	out, _, err := runWatchCmd(context.Background(), srv.URL, "--window", "2s", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rec generator.ServerRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("watch --json printed %q: %v", out, err)
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.at) != 2 {
		t.Fatalf("watch scraped %d times, want 2 (one at each end of the window)", len(log.at))
	}
	window := log.at[1].Sub(log.at[0]).Seconds()
	want := float64(log.gen[1]-log.gen[0]) / window
	t.Logf("watch %.0f tok/s over %.3f s; the mock generated %.0f tok/s over %.3f s (%d tokens)",
		rec.GenTokPerS, rec.WindowS, want, window, log.gen[1]-log.gen[0])
	// The load must be real for the comparison to mean anything: at least
	// a third of the nominal rate, whatever else runs on the machine.
	if nominal := float64(clients) / tokenDelay.Seconds(); want < nominal/3 {
		t.Fatalf("the mock generated only %.0f tok/s (nominal %.0f): no steady load to compare", want, nominal)
	}
	if diff := math.Abs(rec.GenTokPerS-want) / want; diff > 0.05 {
		t.Errorf("watch says %.0f tok/s, the mock generated %.0f tok/s: %.1f%% apart, want within 5%%",
			rec.GenTokPerS, want, 100*diff)
	}
	if rec.Running < clients/2 || rec.URL != srv.URL+"/metrics" {
		t.Errorf("record = %+v, want about %d running at %s/metrics", rec, clients, srv.URL)
	}
}

// TestWatchBareHostPort: `synthgen watch 127.0.0.1:8000` is what people
// type; it means http://127.0.0.1:8000, as does host:port/v1.
func TestWatchBareHostPort(t *testing.T) {
	srv := httptest.NewServer(&fakeVLLM{rate: 1000, start: time.Now()})
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	for _, target := range []string{hostPort, hostPort + "/v1", " " + hostPort + "/metrics"} {
		out, _, err := runWatchCmd(context.Background(), target, "--window", "10ms")
		if err != nil {
			t.Fatalf("watch %q: %v", target, err)
		}
		if want := " window, " + srv.URL + "/metrics)\n"; !strings.HasSuffix(out, want) {
			t.Errorf("watch %q: %q, want it to end with %q", target, out, want)
		}
	}
}
