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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/mockserver"
)

// fakeVLLM serves /metrics in vLLM's layout (two engines). Its generation
// counter grows by step tokens before each scrape it answers, and it keeps
// every value it served, so a test compares watch's figure with the very
// counter values watch read: the same counter over the same scrape window,
// exactly, whatever the machine's load does to the clock.
type fakeVLLM struct {
	step float64

	mu      sync.Mutex
	scrapes int       // /metrics requests, answered or not
	served  []float64 // the generation counter of each answered scrape
	// down says whether the n-th request (from 1) is answered 404.
	down func(n int) bool
	// At the stopAt-th request (from 1), stop is called (the test's Ctrl-C)
	// and the request is held until the client gives up on it.
	stopAt int
	stop   func()
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	f.scrapes++
	n := f.scrapes
	if f.stopAt > 0 && n == f.stopAt {
		f.mu.Unlock()
		f.stop()
		<-r.Context().Done()
		return
	}
	if f.down != nil && f.down(n) {
		f.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	gen := f.step * float64(len(f.served)+1)
	f.served = append(f.served, gen)
	f.mu.Unlock()
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
	cmd.SetArgs(append([]string{}, args...)) // never nil: cobra reads os.Args for nil
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// watchSaid checks that rec is the server's counter delta over watch's own
// window: rate times window gives back exactly the tokens the server
// counted between the two scrapes watch read (up to float rounding). This
// holds however long the window really was, so a loaded machine cannot
// fail it; how fast watch is on time is not its business.
func watchSaid(t *testing.T, rec runstats.ServerRecord, delta float64) {
	t.Helper()
	if got := rec.GenTokPerS * rec.WindowS; math.Abs(got-delta) > 1e-9*math.Max(1, delta) {
		t.Errorf("watch says %v tok/s over %v s = %v tokens; the server counted %v between the two scrapes", rec.GenTokPerS, rec.WindowS, got, delta)
	}
}

// lastDelta is the generation tokens the fake counted between its last two
// answered scrapes.
func (f *fakeVLLM) lastDelta(t *testing.T) float64 {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.served) < 2 {
		t.Fatalf("the fake answered %d scrapes, want 2", len(f.served))
	}
	return f.served[len(f.served)-1] - f.served[len(f.served)-2]
}

// The reported tok/s is the server's counter over watch's window, from any
// of the three spellings of the URL; the line carries the server's gauges.
func TestWatchRate(t *testing.T) {
	t.Parallel()
	for _, suffix := range []string{"", "/v1", "/metrics"} {
		t.Run(suffix, func(t *testing.T) {
			fake := &fakeVLLM{step: 5000}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			out, _, err := runWatchCmd(context.Background(), srv.URL+suffix, "--window", "200ms", "--json")
			if err != nil {
				t.Fatal(err)
			}
			var rec runstats.ServerRecord
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatalf("watch --json printed %q: %v", out, err)
			}
			watchSaid(t, rec, fake.lastDelta(t))
			if rec.URL != srv.URL+"/metrics" || rec.Running != 198 || rec.Waiting != 2 {
				t.Errorf("record = %+v, want 198 running, 2 waiting at %s/metrics", rec, srv.URL)
			}
		})
	}
	t.Run("text", func(t *testing.T) {
		fake := &fakeVLLM{step: 5000}
		srv := httptest.NewServer(fake)
		defer srv.Close()
		out, _, err := runWatchCmd(context.Background(), srv.URL, "--window", "1s")
		if err != nil {
			t.Fatal(err)
		}
		// The window as watch measured it, rounded to the second: 1s on
		// an idle machine, more on a loaded one.
		want := regexp.MustCompile(`^[0-9]+ tok/s running 198 waiting 2 kv 85% \([0-9]+s window, ` + regexp.QuoteMeta(srv.URL) + `/metrics\)\n$`)
		if !want.MatchString(out) {
			t.Errorf("output = %q, want it to match %s", out, want)
		}
	})
}

func TestWatchFollowJSON(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The fourth scrape is the Ctrl-C: three answered scrapes, two lines.
	fake := &fakeVLLM{step: 2000, stopAt: 4, stop: cancel}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	out, _, err := runWatchCmd(ctx, srv.URL, "--follow", "--json", "--window", "100ms", "--interval", "100ms")
	if err != nil {
		t.Fatalf("--follow ended with %v, want a clean stop at Ctrl-C", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines from 3 answered scrapes, want 2:\n%s", len(lines), out)
	}
	for i, l := range lines {
		var rec runstats.ServerRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not JSON: %v: %s", err, l)
		}
		watchSaid(t, rec, fake.served[i+1]-fake.served[i])
		if rec.Running != 198 || rec.KVCacheUsage == nil || rec.URL != srv.URL+"/metrics" || rec.SpecAcceptanceRate != nil {
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
		{"down", []string{downURL}, exitFailure, downURL + "/metrics", "is the server running?"},
		{"no known kind", []string{other.URL}, exitFailure, "no vLLM, SGLang or llama.cpp metrics", "serves none of vLLM's, SGLang's or llama.cpp's metrics"},
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
// Scrapes 3 and 4 find it down, 5 finds it back, 6 is the Ctrl-C: the
// test follows the scrapes, not the clock.
func TestWatchFollowSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := &fakeVLLM{step: 1000, down: func(n int) bool { return n == 3 || n == 4 }, stopAt: 6, stop: cancel}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	out, errOut, err := runWatchCmd(ctx, srv.URL, "--follow", "--window", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errOut, "404 Not Found"); n != 1 {
		t.Errorf("outage reported %d times, want once:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, "answers again") {
		t.Errorf("recovery not reported:\n%s", errOut)
	}
	if n := strings.Count(out, "tok/s"); n != 2 {
		t.Errorf("%d lines, want one before and one after the outage:\n%s", n, out)
	}
}

// scrapeLog keeps what each /metrics response it passes on said: the very
// samples watch reads, so the test's reference is the same counter over the
// same scrape window.
type scrapeLog struct {
	next http.Handler

	mu      sync.Mutex
	samples []promscrape.Sample
}

func (l *scrapeLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		l.next.ServeHTTP(w, r)
		return
	}
	// Plain text, not gzip, so that the test can read what it passes on.
	r.Header.Del("Accept-Encoding")
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, r)
	if s, err := promscrape.Parse(bytes.NewReader(rec.Body.Bytes()), time.Now()); err == nil {
		l.mu.Lock()
		l.samples = append(l.samples, s)
		l.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
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

// `synthgen watch` against the built-in mock under streaming load reports
// the tokens the mock counted between watch's two scrapes, over watch's
// window: the rate a person reads is the server's own.
func TestWatchMatchesMockTokenCount(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("2 s of streaming load")
	}
	const clients = 64
	mock := mockserver.New(mockserver.Options{TokenDelay: 10 * time.Millisecond, MeanTokens: 400})
	log := &scrapeLog{next: mock}
	srv := httptest.NewServer(log)
	defer srv.Close()

	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	streamLoad(ctx, &wg, &http.Client{Transport: tr}, srv.URL, clients)

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
	var rec runstats.ServerRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("watch --json printed %q: %v", out, err)
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.samples) != 2 {
		t.Fatalf("watch scraped %d times, want 2 (one at each end of the window)", len(log.samples))
	}
	a, b := log.samples[0], log.samples[1]
	delta := b.GenerationTokens - a.GenerationTokens
	t.Logf("watch %.0f tok/s over %.3f s; the mock counted %.0f tokens between the scrapes", rec.GenTokPerS, rec.WindowS, delta)
	if delta <= 0 {
		t.Fatalf("the mock counted no tokens between the scrapes: no load to compare")
	}
	watchSaid(t, rec, delta)
	if rec.Running != b.Running || rec.Waiting != b.Waiting || rec.URL != srv.URL+"/metrics" {
		t.Errorf("record = %+v, want the second scrape's %v running, %v waiting at %s/metrics", rec, b.Running, b.Waiting, srv.URL)
	}
}

// TestWatchBareHostPort: `synthgen watch 127.0.0.1:8000` is what people
// type; it means http://127.0.0.1:8000, as does host:port/v1.
func TestWatchBareHostPort(t *testing.T) {
	srv := httptest.NewServer(&fakeVLLM{step: 10})
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

// TestWatchRedactsPassword: a password in watch's URL is on no line a
// person sees (the rates, the outage, the recovery, the error watch ends
// with), for one server and for several, in text and in JSON; the lines
// still name the server, with the password masked.
func TestWatchRedactsPassword(t *testing.T) {
	t.Parallel()
	const secret = "secret"
	withPassword := func(u string) string { return strings.Replace(u, "://", "://u:"+secret+"@", 1) }
	// seen is every line watch shows: stdout, stderr, and the error and
	// hint as main prints them.
	seen := func(stdout, stderr string, err error) []string {
		text := stdout + stderr
		if err != nil {
			text += "Error: " + err.Error() + "\n"
			var ee *exitError
			if errors.As(err, &ee) {
				text += "Hint: " + ee.Hint() + "\n"
			}
		}
		return strings.Split(text, "\n")
	}
	noSecret := func(t *testing.T, lines []string) {
		t.Helper()
		for _, l := range lines {
			if strings.Contains(l, secret) {
				t.Errorf("the password is on a line watch printed: %q", l)
			}
		}
	}
	// follow runs watch --follow over servers, the first of which is down
	// for its scrapes 3 and 4; the last one's scrape 6 is the Ctrl-C.
	follow := func(t *testing.T, servers int, flags ...string) (stdout, stderr string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var urls []string
		for i := range servers {
			fake := &fakeVLLM{step: 1000}
			if i == 0 {
				fake.down = func(n int) bool { return n == 3 || n == 4 }
			}
			if i == servers-1 {
				fake.stopAt, fake.stop = 6, cancel
			}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			urls = append(urls, withPassword(srv.URL))
		}
		args := append([]string{strings.Join(urls, ","), "--follow", "--window", "50ms"}, flags...)
		stdout, stderr, err := runWatchCmd(ctx, args...)
		if err != nil {
			t.Fatalf("--follow ended with %v, want a clean stop at Ctrl-C", err)
		}
		noSecret(t, seen(stdout, stderr, err))
		if !strings.Contains(stderr, "404 Not Found") || !strings.Contains(stderr, "answers again") {
			t.Errorf("outage or recovery not reported:\n%s", stderr)
		}
		if !strings.Contains(stderr, "u:xxxxx@") {
			t.Errorf("the outage does not name the server (password masked):\n%s", stderr)
		}
		return stdout, stderr
	}
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"text", nil}, {"json", []string{"--json"}}} {
		t.Run("one server, "+mode.name, func(t *testing.T) {
			if out, _ := follow(t, 1, mode.flags...); !strings.Contains(out, "u:xxxxx@") {
				t.Errorf("the rates do not name the server (password masked):\n%s", out)
			}
		})
		t.Run("several servers, "+mode.name, func(t *testing.T) {
			if out, _ := follow(t, 2, append(mode.flags, "--each")...); !strings.Contains(out, "u:xxxxx@") {
				t.Errorf("each server's rates do not name it (password masked):\n%s", out)
			}
		})
	}

	// Without --follow a server down at the first scrape ends watch with
	// an error, and a URL watch cannot use with a usage error.
	down := httptest.NewServer(http.NotFoundHandler())
	defer down.Close()
	up := httptest.NewServer(&fakeVLLM{step: 10})
	defer up.Close()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"one down", []string{withPassword(down.URL)}},
		{"several, one down", []string{withPassword(up.URL), withPassword(down.URL)}},
		{"one not a url", []string{"ftp://u:" + secret + "@127.0.0.1:1"}},
		{"several, one not a url", []string{withPassword(up.URL), "ftp://u:" + secret + "@127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := runWatchCmd(context.Background(), append(tc.args, "--window", "10ms")...)
			if err == nil {
				t.Fatalf("watch %v succeeded, want an error", tc.args)
			}
			noSecret(t, seen(stdout, stderr, err))
			if !strings.Contains(err.Error(), "u:xxxxx@") {
				t.Errorf("the error %q does not name the server (password masked)", err)
			}
		})
	}
}
